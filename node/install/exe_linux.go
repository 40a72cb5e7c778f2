package install

const exeSuffix = ""
