package crictl

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodekit/nodekit/runtime/containerd"
	"github.com/nodekit/nodekit/runtime/cri"
)

// loadCommand imports OCI-layout or docker-save image archives into the runtime's image store (the
// containerd k8s.io namespace, where CRI sees them), showing a progress bar on a terminal. The runtime
// endpoint must be containerd's socket, which serves both CRI and the containerd API.
func (a *app) loadCommand() *cobra.Command {
	var quiet bool
	cmd := &cobra.Command{
		Use:   "load FILE [FILE...]",
		Short: "Import image archives (OCI layout or docker save tarballs) into the runtime",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ep, err := a.endpoint()
			if err != nil {
				return err
			}
			if a.cfg.ImageEndpoint != "" {
				ep = a.cfg.ImageEndpoint
			}
			sock, err := cri.ParseEndpoint(ep)
			if err != nil {
				return err
			}
			im, err := containerd.NewImporter(sock)
			if err != nil {
				return err
			}
			defer im.Close()
			c, cancel := signalContext(cmd)
			defer cancel()
			for _, file := range args {
				bar := a.progressBar(quiet)
				imgs, err := im.ImportFile(c, file, bar.update)
				bar.done()
				if err != nil {
					return err
				}
				for _, img := range imgs {
					fmt.Fprintf(a.out, "Loaded image: %s (%s)\n", img.Name, img.Digest)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "do not show the progress bar")
	return cmd
}

// bar draws "FILE [=====>      ]  45% 12.3MB/27.1MB" on a terminal stderr.
type bar struct {
	a       *app
	enabled bool
	drawn   bool
}

func (a *app) progressBar(quiet bool) *bar {
	return &bar{a: a, enabled: !quiet && isTerminal(a.errOut)}
}

func (b *bar) update(p containerd.ImportProgress) {
	if !b.enabled || p.Total <= 0 {
		return
	}
	fmt.Fprintf(b.a.errOut, "\r%s", renderBar(p.File, p.Done, p.Total, 30))
	b.drawn = true
}

func (b *bar) done() {
	if b.drawn {
		fmt.Fprintln(b.a.errOut)
	}
}

// renderBar renders one progress line of the given bar width.
func renderBar(label string, done, total int64, width int) string {
	done = min(max(done, 0), total)
	fill := int(int64(width) * done / total)
	arrow := ""
	if fill < width {
		arrow = ">"
	}
	return fmt.Sprintf("%s [%s%s%s] %3d%% %s/%s", label, strings.Repeat("=", fill), arrow,
		strings.Repeat(" ", max(width-fill-len(arrow), 0)), 100*done/total,
		humanSize(float64(done), 3), humanSize(float64(total), 3))
}
