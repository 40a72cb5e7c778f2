package install

const exeSuffix = ".exe"
