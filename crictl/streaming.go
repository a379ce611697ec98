package crictl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Streaming transports of the CRI streaming server, as upstream's --transport names them.
const (
	transportSPDY      = "spdy"
	transportWebsocket = "websocket"
)

// streamFlags select how exec/attach/port-forward reach the runtime's streaming server.
type streamFlags struct {
	transport                      string
	tlsSNI, tlsCA, tlsCert, tlsKey string
}

func (f *streamFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&f.transport, "transport", "r", transportSPDY, "transport protocol to use, one of: spdy|websocket")
	fl.StringVar(&f.tlsSNI, "tls-sni", "localhost", "server name used in the TLS client to check server certificates against")
	fl.StringVar(&f.tlsCA, "tls-ca", "", "path to the streaming TLS CA certificate")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "path to the streaming TLS certificate")
	fl.StringVar(&f.tlsKey, "tls-key", "", "path to the streaming TLS key")
}

// restConfig is the client configuration for the streaming server: insecure unless TLS files are given
// (the runtime's streaming server listens on localhost with a self-signed certificate or plain HTTP).
func (f *streamFlags) restConfig() (*rest.Config, error) {
	tls := rest.TLSClientConfig{ServerName: f.tlsSNI, CAFile: f.tlsCA, CertFile: f.tlsCert, KeyFile: f.tlsKey}
	if f.tlsCA == "" && f.tlsCert == "" && f.tlsKey == "" {
		tls = rest.TLSClientConfig{Insecure: true}
	} else if f.tlsCert == "" || f.tlsKey == "" {
		return nil, errors.New("--tls-cert and --tls-key are both required for TLS streaming (--tls-ca is optional)")
	}
	return &rest.Config{TLSClientConfig: tls}, nil
}

// streamURL parses the URL a CRI Exec/Attach/PortForward answer returns; a URL without host is relative
// to the kubelet's server, as the CRI specifies.
func streamURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("streaming URL %q from the runtime: %w", raw, err)
	}
	if u.Host == "" {
		u.Host = "127.0.0.1:10250"
	}
	if u.Scheme == "" {
		u.Scheme = "http"
	}
	return u, nil
}

func (f *streamFlags) executor(u *url.URL) (remotecommand.Executor, error) {
	cfg, err := f.restConfig()
	if err != nil {
		return nil, err
	}
	switch f.transport {
	case transportSPDY:
		return remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u)
	case transportWebsocket:
		return remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, u.String())
	}
	return nil, fmt.Errorf("--transport %q: want spdy or websocket", f.transport)
}

// stream runs a remotecommand session on u with the app's streams. With tty, stdin must be a terminal;
// it is put in raw mode for the session and its size follows SIGWINCH.
func (a *app) stream(c context.Context, f *streamFlags, u *url.URL, stdin, tty bool) error {
	exe, err := f.executor(u)
	if err != nil {
		return err
	}
	opts := remotecommand.StreamOptions{Stdout: a.out, Tty: tty}
	if !tty {
		opts.Stderr = a.errOut
	}
	if stdin {
		opts.Stdin = a.in
	}
	if !tty {
		return exe.StreamWithContext(c, opts)
	}
	if !stdin {
		return errors.New("-t/--tty needs -i/--interactive")
	}
	in, ok := a.in.(*os.File)
	if !ok || !term.IsTerminal(int(in.Fd())) {
		return errors.New("-t/--tty: input is not a terminal")
	}
	old, err := term.MakeRaw(int(in.Fd()))
	if err != nil {
		return fmt.Errorf("-t/--tty: set terminal raw mode: %w", err)
	}
	defer term.Restore(int(in.Fd()), old)
	sizes := newSizeQueue(int(in.Fd()))
	defer sizes.stop()
	opts.TerminalSizeQueue = sizes
	return exe.StreamWithContext(c, opts)
}

// sizeQueue reports the terminal size at start and on every SIGWINCH (remotecommand.TerminalSizeQueue).
type sizeQueue struct {
	fd    int
	sigs  chan os.Signal
	sizes chan *remotecommand.TerminalSize
	done  chan struct{}
}

func newSizeQueue(fd int) *sizeQueue {
	q := &sizeQueue{fd: fd, sigs: make(chan os.Signal, 1), sizes: make(chan *remotecommand.TerminalSize, 1), done: make(chan struct{})}
	signal.Notify(q.sigs, syscall.SIGWINCH)
	q.sigs <- syscall.SIGWINCH
	go func() {
		for {
			select {
			case <-q.done:
				return
			case <-q.sigs:
				if w, h, err := term.GetSize(fd); err == nil {
					select {
					case q.sizes <- &remotecommand.TerminalSize{Width: uint16(w), Height: uint16(h)}:
					case <-q.done:
						return
					}
				}
			}
		}
	}()
	return q
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case s := <-q.sizes:
		return s
	case <-q.done:
		return nil
	}
}

func (q *sizeQueue) stop() {
	signal.Stop(q.sigs)
	close(q.done)
}

// exitCode extracts a remote command's exit status from a stream error (client-go reports a non-zero
// exit as utilexec.CodeExitError).
func exitCode(err error) (int, bool) {
	var ce utilexec.CodeExitError
	if errors.As(err, &ce) {
		return ce.Code, true
	}
	return 0, false
}

// execCommand runs a command in containers: synchronously with -s (ExecSync; the command's stdout and
// stderr are printed when it ends), else streamed through the runtime's streaming server (Exec), with
// -i for stdin and -t for a terminal. The first argument is a CONTAINER-ID prefix, unless a filter flag
// (--name, --pod, --image, --state, --label, --latest, --last) selects the containers, as upstream
// does; then each selected container runs the command, one after the other (or all at once with -x).
// A non-zero exit status of the command becomes crictl's exit status (*ExitError).
func (a *app) execCommand() *cobra.Command {
	var (
		syncExec, tty, interactive    bool
		quiet, ignoreErrors, parallel bool
		timeout                       int64
		sf                            streamFlags
		f                             psFilter
	)
	cmd := &cobra.Command{
		Use:   "exec [flags] [CONTAINER-ID] COMMAND [ARG...]",
		Short: "Run a command in a running container",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout < 0 {
				return fmt.Errorf("--timeout %d: must be 0 (none) or more seconds", timeout)
			}
			c, cancel := signalContext(cmd)
			defer cancel()
			rt, err := a.rt()
			if err != nil {
				return err
			}
			var ids []string
			argv := args
			filtered := false
			for _, name := range []string{"name", "pod", "image", "state", "label", "latest", "last"} {
				filtered = filtered || cmd.Flags().Changed(name)
			}
			if filtered {
				img, err := a.img()
				if err != nil {
					return err
				}
				ctrs, err := listContainers(c, rt, img, &f)
				if err != nil {
					return fmt.Errorf("listing containers: %w", err)
				}
				for _, ctr := range ctrs {
					ids = append(ids, ctr.GetId())
				}
				if len(ids) == 0 {
					return errors.New("exec: no container matches the filter flags")
				}
			} else {
				if len(args) < 2 {
					return errors.New("exec: give CONTAINER-ID COMMAND [ARG...], or filter flags and COMMAND")
				}
				id, err := resolveContainerID(c, rt, args[0])
				if err != nil {
					return err
				}
				ids, argv = []string{id}, args[1:]
			}
			one := func(id string) error {
				if syncExec {
					r, err := rt.ExecSync(c, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: argv, Timeout: timeout})
					if err != nil {
						return fmt.Errorf("execing command in container %s synchronously: %w", id, err)
					}
					a.out.Write(r.GetStdout())
					a.errOut.Write(r.GetStderr())
					if r.GetExitCode() != 0 {
						return &ExitError{Code: int(r.GetExitCode())}
					}
					return nil
				}
				r, err := rt.Exec(c, &runtimeapi.ExecRequest{ContainerId: id, Cmd: argv, Tty: tty, Stdin: interactive, Stdout: true, Stderr: !tty})
				if err != nil {
					return fmt.Errorf("execing command in container %s: %w", id, err)
				}
				u, err := streamURL(r.GetUrl())
				if err != nil {
					return err
				}
				sc := c
				if timeout > 0 {
					var cancelT context.CancelFunc
					sc, cancelT = context.WithTimeout(c, time.Duration(timeout)*time.Second)
					defer cancelT()
				}
				err = a.stream(sc, &sf, u, interactive, tty)
				if code, ok := exitCode(err); ok {
					return &ExitError{Code: code}
				}
				if err != nil {
					return fmt.Errorf("execing command in container %s: %w", id, err)
				}
				return nil
			}
			errs := make([]error, len(ids))
			if parallel {
				var wg sync.WaitGroup
				for i, id := range ids {
					wg.Go(func() { errs[i] = one(id) })
				}
				wg.Wait()
			} else {
				for i, id := range ids {
					if filtered && !quiet {
						fmt.Fprintln(a.out, id+":")
					}
					errs[i] = one(id)
				}
			}
			if ignoreErrors {
				return nil
			}
			return errors.Join(errs...)
		},
	}
	fl := cmd.Flags()
	fl.SetInterspersed(false) // flags after CONTAINER-ID belong to COMMAND
	fl.BoolVarP(&syncExec, "sync", "s", false, "run the command synchronously (ExecSync)")
	fl.Int64Var(&timeout, "timeout", 0, "timeout in seconds; 0 for none")
	fl.BoolVarP(&tty, "tty", "t", false, "allocate a pseudo-TTY")
	fl.BoolVarP(&interactive, "interactive", "i", false, "keep STDIN open")
	fl.StringVar(&f.name, "name", "", "exec in all containers whose name matches this regular expression")
	fl.StringVarP(&f.pod, "pod", "p", "", "exec in all containers of this pod (ID prefix)")
	fl.StringVar(&f.image, "image", "", "exec in all containers of this image")
	fl.StringVar(&f.state, "state", "", "exec in all containers in this state")
	fl.StringArrayVar(&f.labels, "label", nil, "exec in all containers with this key=value label")
	fl.BoolVarP(&f.latest, "latest", "l", false, "exec in the most recently created container")
	fl.IntVarP(&f.last, "last", "n", 0, "exec in the last n containers; 0 for unlimited")
	fl.BoolVarP(&quiet, "quiet", "q", false, "do not print the container ID when several containers are selected")
	fl.BoolVarP(&ignoreErrors, "ignore-errors", "e", false, "ignore errors of the command")
	fl.BoolVarP(&parallel, "parallel", "x", false, "run the command in the selected containers in parallel")
	sf.add(cmd)
	return cmd
}

// attachCommand attaches to a running container's streams (Attach).
func (a *app) attachCommand() *cobra.Command {
	var (
		tty, interactive bool
		sf               streamFlags
	)
	cmd := &cobra.Command{
		Use:   "attach CONTAINER-ID",
		Short: "Attach to a running container",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, cancel := signalContext(cmd)
			defer cancel()
			rt, id, err := a.container(c, args[0])
			if err != nil {
				return err
			}
			r, err := rt.Attach(c, &runtimeapi.AttachRequest{ContainerId: id, Tty: tty, Stdin: interactive, Stdout: true, Stderr: !tty})
			if err != nil {
				return fmt.Errorf("attaching to container %s: %w", id, err)
			}
			u, err := streamURL(r.GetUrl())
			if err != nil {
				return err
			}
			if err := a.stream(c, &sf, u, interactive, tty); err != nil && c.Err() == nil {
				return fmt.Errorf("attaching to container %s: %w", id, err)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "stdin is a TTY")
	cmd.Flags().BoolVarP(&interactive, "stdin", "i", false, "pass stdin to the container")
	sf.add(cmd)
	return cmd
}

// portForwardCommand forwards local ports to a pod sandbox's ports (PortForward) until interrupted.
func (a *app) portForwardCommand() *cobra.Command {
	var (
		sf        streamFlags
		addresses []string
	)
	cmd := &cobra.Command{
		Use:   "port-forward POD-ID [LOCAL_PORT:]REMOTE_PORT...",
		Short: "Forward local port to a pod",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			rt, err := a.rt()
			if err != nil {
				return err
			}
			c, cancel := signalContext(cmd)
			defer cancel()
			id, err := resolvePodID(c, rt, args[0])
			if err != nil {
				return err
			}
			r, err := rt.PortForward(c, &runtimeapi.PortForwardRequest{PodSandboxId: id})
			if err != nil {
				return fmt.Errorf("port forward to pod %s: %w", id, err)
			}
			u, err := streamURL(r.GetUrl())
			if err != nil {
				return err
			}
			cfg, err := sf.restConfig()
			if err != nil {
				return err
			}
			var d httpstream.Dialer
			switch sf.transport {
			case transportSPDY:
				tr, upgrader, err := spdy.RoundTripperFor(cfg)
				if err != nil {
					return err
				}
				d = spdy.NewDialer(upgrader, &http.Client{Transport: tr}, http.MethodPost, u)
			case transportWebsocket:
				if d, err = portforward.NewSPDYOverWebsocketDialer(u, cfg); err != nil {
					return err
				}
			default:
				return fmt.Errorf("--transport %q: want spdy or websocket", sf.transport)
			}
			pf, err := portforward.NewOnAddressesWithContext(c, d, addresses, args[1:], make(chan struct{}), a.out, a.errOut)
			if err != nil {
				return err
			}
			if err := pf.ForwardPorts(); err != nil && c.Err() == nil {
				return fmt.Errorf("port forward to pod %s: %w", id, err)
			}
			return nil
		},
	}
	sf.add(cmd)
	cmd.Flags().StringSliceVar(&addresses, "address", []string{"localhost"}, "addresses to listen on (comma separated)")
	return cmd
}
