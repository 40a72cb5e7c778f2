package install

const exeSuffix = ".exe"

// imageLocked: Windows refuses to replace the file of a running executable (the plugin
// while containerd runs it), though it lets it be renamed.
const imageLocked = true
