package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// strictCommandLine makes every command in the tree under c, cobra's own completion
// commands included, refuse a bad command line with a usageError (exit status 2):
// cobra reports a word that names no subcommand, and runs its own argument checks,
// with plain errors that would exit 1, or for a command with subcommands but nothing
// to run shows help and exits 0. A command with subcommands gets unknownCommand as its
// argument check (and, when it has nothing to run, shows its help, so the check runs);
// every other argument check is wrapped by args. Call it once the tree is complete.
func strictCommandLine(c *cobra.Command) {
	switch {
	case c.HasSubCommands():
		c.Args = args(unknownCommand)
		if c.SuggestionsMinimumDistance <= 0 {
			c.SuggestionsMinimumDistance = 2 // cobra's default, which it sets only for its own message
		}
		if !c.Runnable() {
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
	case c.Args != nil:
		c.Args = args(c.Args)
	}
	for _, sub := range c.Commands() {
		strictCommandLine(sub)
	}
}

// unknownCommand is the argument check of a command with subcommands: any argument
// left is a word that names none of them.
func unknownCommand(cmd *cobra.Command, a []string) error {
	if len(a) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", a[0], cmd.CommandPath())
	switch s := cmd.SuggestionsFor(a[0]); len(s) {
	case 0:
	case 1:
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	default:
		msg += fmt.Sprintf("; did you mean one of %q?", strings.Join(s, `", "`))
	}
	return fmt.Errorf("%s (see %q)", msg, cmd.CommandPath()+" --help")
}

// helpCmd replaces cobra's help command, which prints an unknown topic's name and the
// usage and exits 0: "help PATH" shows the help of the command PATH names, and a word
// in PATH that names no subcommand is a usageError.
func helpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "Help shows the help of the command its arguments name: rockline help [path to command].",
		RunE: func(c *cobra.Command, a []string) error {
			cmd, rest, err := c.Root().Find(a)
			if err != nil {
				return usageError{err}
			}
			if cmd.HasSubCommands() {
				if err := unknownCommand(cmd, rest); err != nil {
					return usageError{err}
				}
			}
			return cmd.Help()
		},
	}
}
