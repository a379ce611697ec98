package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nodekit/nodekit/images/build"
)

// imagesCmd groups the bundled-image commands.
var imagesCmd = &cobra.Command{
	Use:   "images",
	Short: "Build nodekit's bundled OCI images (pause, demo-server)",
}

func init() {
	var opts build.Options
	buildCmd := &cobra.Command{
		Use:   "build --out DIR",
		Short: "Compile the bundled images from the nodekit sources into OCI image archives",
		Long: `Compiles the pause and demo-server images from this source tree (needs a Go toolchain) and
writes one OCI image archive per image into DIR, reproducibly. Put DIR's archives in <data-dir>/images to
have the agent import them into containerd at start, or serve them with 'nodekit registry'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := build.Build(cmd.Context(), opts)
			if err != nil {
				return err
			}
			for _, r := range res {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\t%s\n", r.Ref, r.Digest, r.File)
			}
			return nil
		},
	}
	buildCmd.Flags().StringVar(&opts.OutDir, "out", "_output/images", "directory to write the image archives to")
	buildCmd.Flags().StringVar(&opts.ModuleDir, "source", "", "nodekit source tree (default: found from the working directory)")
	buildCmd.Flags().StringVar(&opts.Arch, "arch", "", "GOARCH to build for (default: this machine's)")
	imagesCmd.AddCommand(buildCmd)
	root.AddCommand(imagesCmd)
}
