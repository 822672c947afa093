package main

import (
	"github.com/doppelproxy/doppel/internal/version"
	"github.com/spf13/cobra"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use: "version",
		Example: `  doppel version
  doppel --version`,
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return write(cmd, "doppel "+version.Version+"\n")
		},
	}
}
