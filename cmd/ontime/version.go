package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ontimehq/ontime/internal/buildinfo"
)

// versionJSON is `ontime version --json`: the build's Info, with the
// commit also under "revision", the name ontime_build_info's label has.
type versionJSON struct {
	buildinfo.Info
	Revision string `json:"revision,omitempty"`
}

func versionString() string { return buildinfo.Read().String() }

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Long: `Print the version of this binary, the commit it was built from and the Go
version. Release builds (make build, make release, the container image)
carry the version git describe gave; other builds say what the Go
toolchain recorded: the module version (go install …@vX.Y.Z) and the
commit of the checkout, or "(devel)" when it recorded none. The same
version and commit label the ontime_build_info metric.`,
		Example: `  ontime version
  ontime version --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := buildinfo.Read()
			if g.json {
				return g.printJSON(cmd, versionJSON{Info: v, Revision: v.Commit})
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), v)
			return err
		},
	}
}
