package main

import (
	"fmt"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/control"
	"github.com/spf13/cobra"
)

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "token",
		Example: `  doppel token add --name ci --group admin --config main.yaml`,
		Short:   "Manage admin tokens",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return usage("a token subcommand is required")
		},
	}
	cmd.AddCommand(newTokenAddCmd())
	return cmd
}

func newTokenAddCmd() *cobra.Command {
	var flags storeFlags
	var name, group, socket string
	cmd := &cobra.Command{
		Use: "add",
		Example: `  doppel token add --name ci --group admin --config main.yaml
  doppel token add --name dashboard --socket /tmp/doppel.sock`,
		Short: "Add an admin token to a running doppel serve",
		Long: `Add an admin token to a running doppel serve, over the control socket.

The server generates the token (a UUID v4), stores it and puts it in force
before answering. The token is printed alone on the last line, so
"| tail -1" captures it. The group defaults to user, which reads; --group
admin may write. A name already in use, or supplied by DOPPEL_ADMIN_TOKENS,
is refused (exit 1, "token not issued: <CODE>" and the reason), and so is a doppel behind the socket that serves
another configuration than the one named (--socket alone skips that
check).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := config.ParseName(name); err != nil {
				return usage("--name: %v", err)
			}
			if _, err := config.ParseName(group); err != nil {
				return usage("--group: %v", err)
			}
			path, serves, err := socketPath(cmd, &flags, socket)
			if err != nil {
				return err
			}
			resp, err := callControl(path, serves, control.Request{Command: "token_add", Name: name, Group: group})
			if err != nil {
				return err
			}
			if !resp.OK {
				return refusal(cmd, "token not issued", resp)
			}
			// Doppel 1.1's lines, the token alone on the last.
			return write(cmd, fmt.Sprintf("token `%s` issued to group `%s`, revision %s\nit is in force now, and this is the only time it is shown:\n%s\n",
				name, group, resp.Revision, resp.Token))
		},
	}
	flags.register(cmd)
	cmd.Flags().StringVar(&name, "name", "", "the token's name (required)")
	cmd.Flags().StringVar(&group, "group", string(config.GroupUser), "the token's group")
	cmd.Flags().StringVar(&socket, "socket", "", "the control socket; alone, no configuration is read and whichever doppel listens there adds the token")
	return cmd
}
