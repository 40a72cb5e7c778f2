// Package cliapp builds the command lines of every ovn-transparent binary the same way: each
// flag can be given on the command line, in an environment variable OVNT_<FLAG_NAME>, or in a
// YAML config file named by --config (OVNT_CONFIG), in that order of precedence; every binary
// has a `version` command and --version.
package cliapp

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
)

// Set at link time: -ldflags "-X github.com/ovn-transparent/ovn-transparent/internal/cliapp.version=v0.1.0 ...".
var (
	version = "dev"
	commit  = "unknown"
)

// Version is the build's version string.
func Version() string {
	return fmt.Sprintf("%s (commit %s, %s, %s/%s)", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// ConfigFlag names the flag that points at the YAML config file.
const ConfigFlag = "config"

// EnvName is the environment variable that sets flag name: OVNT_ and the name in upper case
// with dashes as underscores.
func EnvName(name string) string {
	return "OVNT_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// New returns an app whose flags (made with String, Int, Bool, Duration) also read from the
// environment and the config file. The config file's keys are the flag names.
func New(name, usage string, flags []cli.Flag, action cli.ActionFunc) *cli.App {
	all := append([]cli.Flag{&cli.StringFlag{
		Name:    ConfigFlag,
		Usage:   "YAML file whose keys are flag names; command-line flags and environment variables override it",
		EnvVars: []string{EnvName(ConfigFlag)},
	}}, flags...)
	return &cli.App{
		Name:    name,
		Usage:   usage,
		Version: Version(),
		Flags:   all,
		Before:  altsrc.InitInputSourceWithContext(all, altsrc.NewYamlSourceFromFlagFunc(ConfigFlag)),
		Action:  action,
		Commands: []*cli.Command{{
			Name:  "version",
			Usage: "print the version and exit",
			Action: func(c *cli.Context) error {
				_, err := fmt.Fprintf(c.App.Writer, "%s %s\n", name, Version())
				return err
			},
		}},
		// Errors are returned to main, which prints them once and exits non-zero.
		ExitErrHandler: func(*cli.Context, error) {},
	}
}

// String is a string flag that also reads OVNT_<NAME> and the config file.
func String(name, value, usage string) cli.Flag {
	return altsrc.NewStringFlag(&cli.StringFlag{Name: name, Value: value, Usage: usage, EnvVars: []string{EnvName(name)}})
}

// Int is an int flag that also reads OVNT_<NAME> and the config file.
func Int(name string, value int, usage string) cli.Flag {
	return altsrc.NewIntFlag(&cli.IntFlag{Name: name, Value: value, Usage: usage, EnvVars: []string{EnvName(name)}})
}

// Bool is a bool flag that also reads OVNT_<NAME> and the config file.
func Bool(name string, value bool, usage string) cli.Flag {
	return altsrc.NewBoolFlag(&cli.BoolFlag{Name: name, Value: value, Usage: usage, EnvVars: []string{EnvName(name)}})
}

// Duration is a duration flag ("30s", "2m") that also reads OVNT_<NAME> and the config file.
func Duration(name string, value time.Duration, usage string) cli.Flag {
	return altsrc.NewDurationFlag(&cli.DurationFlag{Name: name, Value: value, Usage: usage, EnvVars: []string{EnvName(name)}})
}
