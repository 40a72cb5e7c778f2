// Package cliapptest runs a binary's command line in tests the way main does, but hands the
// parsed context to the test instead of the binary's action.
package cliapptest

import (
	"bytes"

	"github.com/urfave/cli/v2"
)

// Run parses args (without the program name) with app's flags, config file and environment,
// calls read with the result instead of app's action, and returns read's error or the
// parsing error. The app's output is discarded.
func Run(app *cli.App, args []string, read func(*cli.Context) error) error {
	app.Action = read
	app.Writer, app.ErrWriter = &bytes.Buffer{}, &bytes.Buffer{}
	return app.Run(append([]string{app.Name}, args...))
}

// Parse is Run for the common case: read turns the parsed flags into a configuration, which
// Parse returns with read's error.
func Parse[T any](app *cli.App, args []string, read func(*cli.Context) (T, error)) (T, error) {
	var got T
	err := Run(app, args, func(c *cli.Context) error {
		var err error
		got, err = read(c)
		return err
	})
	return got, err
}
