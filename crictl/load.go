package crictl

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodekit/nodekit/runtime/containerd"
	"github.com/nodekit/nodekit/runtime/cri"
)

// loadOptions are the options of load.
type loadOptions struct {
	files []string
	quiet bool
}

// loadCommand imports OCI-layout or docker-save image archives into the runtime's image store (the
// containerd k8s.io namespace, where CRI sees them), showing a progress bar on a terminal. The runtime
// endpoint must be containerd's socket, which serves both CRI and the containerd API.
func (a *app) loadCommand() *cobra.Command {
	var o loadOptions
	cmd := &cobra.Command{
		Use:   "load FILE [FILE...]",
		Short: "Import image archives (OCI layout or docker save tarballs) into the runtime",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ep, err := a.endpoint()
			if err != nil {
				return err
			}
			o.files = args
			c, cancel := interruptible(ctx(cmd))
			defer cancel()
			return o.run(c, cmp.Or(a.cfg.ImageEndpoint, ep), a.streams)
		},
	}
	cmd.Flags().BoolVarP(&o.quiet, "quiet", "q", false, "do not show the progress bar")
	return cmd
}

// run imports each file through containerd's API at endpoint, printing "Loaded image: NAME (DIGEST)"
// per image; the progress bar goes to s.errOut when it is a terminal.
func (o *loadOptions) run(c context.Context, endpoint string, s streams) error {
	sock, err := cri.ParseEndpoint(endpoint)
	if err != nil {
		return err
	}
	im, err := containerd.NewImporter(sock)
	if err != nil {
		return err
	}
	defer im.Close()
	for _, file := range o.files {
		b := &bar{w: s.errOut, enabled: !o.quiet && isTerminal(s.errOut)}
		imgs, err := im.ImportFile(c, file, b.update)
		b.done()
		if err != nil {
			return err
		}
		for _, img := range imgs {
			fmt.Fprintf(s.out, "Loaded image: %s (%s)\n", img.Name, img.Digest)
		}
	}
	return nil
}

// bar draws "FILE [=====>      ]  45% 12.3MB/27.1MB" on w.
type bar struct {
	w       io.Writer
	enabled bool
	drawn   bool
}

func (b *bar) update(p containerd.ImportProgress) {
	if !b.enabled || p.Total <= 0 {
		return
	}
	fmt.Fprintf(b.w, "\r%s", renderBar(p.File, p.Done, p.Total, 30))
	b.drawn = true
}

func (b *bar) done() {
	if b.drawn {
		fmt.Fprintln(b.w)
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
