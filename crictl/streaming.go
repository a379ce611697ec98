package crictl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
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
	longAlias(fl, "tls-sni", "tls-server-name")
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

// stream runs a remotecommand session on u with the streams s (stdin only with stdin). With tty, s.in
// must be a terminal; it is put in raw mode for the session and its size follows SIGWINCH.
func (f *streamFlags) stream(c context.Context, s streams, u *url.URL, stdin, tty bool) error {
	exe, err := f.executor(u)
	if err != nil {
		return err
	}
	opts := remotecommand.StreamOptions{Stdout: s.out, Tty: tty}
	if !tty {
		opts.Stderr = s.errOut
	}
	if stdin {
		opts.Stdin = s.in
	}
	if !tty {
		return exe.StreamWithContext(c, opts)
	}
	if !stdin {
		return errors.New("-t/--tty needs -i/--interactive")
	}
	in, ok := s.in.(*os.File)
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

// execOptions are the options of exec.
type execOptions struct {
	// filter selects the containers when filtered; else the first argument is a CONTAINER-ID prefix.
	filter   psFilter
	filtered bool
	args     []string

	sync, tty, interactive        bool
	quiet, ignoreErrors, parallel bool
	// timeout is in seconds; 0 for none.
	timeout int64
	stream  streamFlags
}

// execFilterFlags are the exec flags that select containers by filter instead of by ID.
var execFilterFlags = []string{"name", "pod", "image", "state", "label", "latest", "last"}

// execCommand runs a command in containers: synchronously with -s (ExecSync; the command's stdout and
// stderr are printed when it ends), else streamed through the runtime's streaming server (Exec), with
// -i for stdin and -t for a terminal. The first argument is a CONTAINER-ID prefix, unless a filter flag
// (--name, --pod, --image, --state, --label, --latest, --last) selects the containers, as upstream
// does; then each selected container runs the command, one after the other (or all at once with -x).
// A non-zero exit status of the command becomes crictl's exit status (*ExitError).
func (a *app) execCommand() *cobra.Command {
	var o execOptions
	cmd := &cobra.Command{
		Use:   "exec [flags] [CONTAINER-ID] COMMAND [ARG...]",
		Short: "Run a command in a running container",
		Args:  cobra.MinimumNArgs(1),
	}
	cmd.RunE = a.runE(untilSignal(func(c context.Context, cl criClient, args []string) error {
		o.args = args
		o.filtered = slices.ContainsFunc(execFilterFlags, cmd.Flags().Changed)
		return o.run(c, cl, a.streams)
	}))
	fl := cmd.Flags()
	fl.SetInterspersed(false) // flags after CONTAINER-ID belong to COMMAND
	fl.BoolVarP(&o.sync, "sync", "s", false, "run the command synchronously (ExecSync)")
	fl.Int64Var(&o.timeout, "timeout", 0, "timeout in seconds; 0 for none")
	fl.BoolVarP(&o.tty, "tty", "t", false, "allocate a pseudo-TTY")
	fl.BoolVarP(&o.interactive, "interactive", "i", false, "keep STDIN open")
	fl.StringVar(&o.filter.name, "name", "", "exec in all containers whose name matches this regular expression")
	fl.StringVarP(&o.filter.pod, "pod", "p", "", "exec in all containers of this pod (ID prefix)")
	fl.StringVar(&o.filter.image, "image", "", "exec in all containers of this image")
	fl.StringVar(&o.filter.state, "state", "", "exec in all containers in this state")
	fl.StringArrayVar(&o.filter.labels, "label", nil, "exec in all containers with this key=value label")
	fl.BoolVarP(&o.filter.latest, "latest", "l", false, "exec in the most recently created container")
	fl.IntVarP(&o.filter.last, "last", "n", 0, "exec in the last n containers; 0 for unlimited")
	fl.BoolVarP(&o.quiet, "quiet", "q", false, "do not print the container ID when several containers are selected")
	fl.BoolVarP(&o.ignoreErrors, "ignore-errors", "e", false, "ignore errors of the command")
	fl.BoolVarP(&o.parallel, "parallel", "x", false, "run the command in the selected containers in parallel")
	o.stream.add(cmd)
	return cmd
}

// run execs the command in every target container and joins the failures (none with -e).
func (o *execOptions) run(c context.Context, cl criClient, s streams) error {
	if o.timeout < 0 {
		return fmt.Errorf("--timeout %d: must be 0 (none) or more seconds", o.timeout)
	}
	ids, argv, err := o.targets(c, cl)
	if err != nil {
		return err
	}
	errs := make([]error, len(ids))
	if o.parallel {
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Go(func() { errs[i] = o.execIn(c, cl.rt, s, id, argv) })
		}
		wg.Wait()
	} else {
		for i, id := range ids {
			if o.filtered && !o.quiet {
				fmt.Fprintln(s.out, id+":")
			}
			errs[i] = o.execIn(c, cl.rt, s, id, argv)
		}
	}
	if o.ignoreErrors {
		return nil
	}
	return errors.Join(errs...)
}

// targets returns the containers to exec in and the command: those the filters select and all the
// arguments, or the container the first argument names and the rest.
func (o *execOptions) targets(c context.Context, cl criClient) (ids, argv []string, err error) {
	if !o.filtered {
		if len(o.args) < 2 {
			return nil, nil, errors.New("exec: give CONTAINER-ID COMMAND [ARG...], or filter flags and COMMAND")
		}
		id, err := resolveContainerID(c, cl.rt, o.args[0])
		if err != nil {
			return nil, nil, err
		}
		return []string{id}, o.args[1:], nil
	}
	ctrs, err := listContainers(c, cl.rt, cl.img, &o.filter)
	if err != nil {
		return nil, nil, fmt.Errorf("listing containers: %w", err)
	}
	if len(ctrs) == 0 {
		return nil, nil, errors.New("exec: no container matches the filter flags")
	}
	return idsOf(ctrs), o.args, nil
}

// execIn runs argv in one container: with ExecSync (-s), or streamed. A non-zero exit status comes back
// as *ExitError.
func (o *execOptions) execIn(c context.Context, rt runtimeapi.RuntimeServiceClient, s streams, id string, argv []string) error {
	if o.sync {
		r, err := rt.ExecSync(c, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: argv, Timeout: o.timeout})
		if err != nil {
			return fmt.Errorf("execing command in container %s synchronously: %w", id, err)
		}
		s.out.Write(r.GetStdout())
		s.errOut.Write(r.GetStderr())
		if r.GetExitCode() != 0 {
			return &ExitError{Code: int(r.GetExitCode())}
		}
		return nil
	}
	r, err := rt.Exec(c, &runtimeapi.ExecRequest{ContainerId: id, Cmd: argv, Tty: o.tty, Stdin: o.interactive, Stdout: true, Stderr: !o.tty})
	if err != nil {
		return fmt.Errorf("execing command in container %s: %w", id, err)
	}
	u, err := streamURL(r.GetUrl())
	if err != nil {
		return err
	}
	if o.timeout > 0 {
		var cancel context.CancelFunc
		c, cancel = context.WithTimeout(c, time.Duration(o.timeout)*time.Second)
		defer cancel()
	}
	err = o.stream.stream(c, s, u, o.interactive, o.tty)
	if code, ok := exitCode(err); ok {
		return &ExitError{Code: code}
	}
	if err != nil {
		return fmt.Errorf("execing command in container %s: %w", id, err)
	}
	return nil
}

// attachOptions are the options of attach.
type attachOptions struct {
	prefix           string
	tty, interactive bool
	stream           streamFlags
}

// attachCommand attaches to a running container's streams (Attach).
func (a *app) attachCommand() *cobra.Command {
	var o attachOptions
	cmd := &cobra.Command{
		Use:   "attach CONTAINER-ID",
		Short: "Attach to a running container",
		Args:  cobra.ExactArgs(1),
		RunE: a.runE(untilSignal(func(c context.Context, cl criClient, args []string) error {
			o.prefix = args[0]
			return o.run(c, cl, a.streams)
		})),
	}
	cmd.Flags().BoolVarP(&o.tty, "tty", "t", false, "stdin is a TTY")
	cmd.Flags().BoolVarP(&o.interactive, "stdin", "i", false, "pass stdin to the container")
	o.stream.add(cmd)
	return cmd
}

// run streams the container's output (and with -i, s.in to it) until it ends or c is cancelled.
func (o *attachOptions) run(c context.Context, cl criClient, s streams) error {
	id, err := resolveContainerID(c, cl.rt, o.prefix)
	if err != nil {
		return err
	}
	r, err := cl.rt.Attach(c, &runtimeapi.AttachRequest{ContainerId: id, Tty: o.tty, Stdin: o.interactive, Stdout: true, Stderr: !o.tty})
	if err != nil {
		return fmt.Errorf("attaching to container %s: %w", id, err)
	}
	u, err := streamURL(r.GetUrl())
	if err != nil {
		return err
	}
	if err := o.stream.stream(c, s, u, o.interactive, o.tty); err != nil && c.Err() == nil {
		return fmt.Errorf("attaching to container %s: %w", id, err)
	}
	return nil
}

// portForwardOptions are the options of port-forward.
type portForwardOptions struct {
	prefix           string
	ports, addresses []string
	stream           streamFlags
}

// portForwardCommand forwards local ports to a pod sandbox's ports (PortForward) until interrupted.
func (a *app) portForwardCommand() *cobra.Command {
	var o portForwardOptions
	cmd := &cobra.Command{
		Use:   "port-forward POD-ID [LOCAL_PORT:]REMOTE_PORT...",
		Short: "Forward local port to a pod",
		Args:  cobra.MinimumNArgs(2),
		RunE: a.runE(untilSignal(func(c context.Context, cl criClient, args []string) error {
			o.prefix, o.ports = args[0], args[1:]
			return o.run(c, cl, a.streams)
		})),
	}
	o.stream.add(cmd)
	cmd.Flags().StringSliceVar(&o.addresses, "address", []string{"localhost"}, "addresses to listen on (comma separated)")
	return cmd
}

// run forwards the ports until c is cancelled.
func (o *portForwardOptions) run(c context.Context, cl criClient, s streams) error {
	id, err := resolvePodID(c, cl.rt, o.prefix)
	if err != nil {
		return err
	}
	r, err := cl.rt.PortForward(c, &runtimeapi.PortForwardRequest{PodSandboxId: id})
	if err != nil {
		return fmt.Errorf("port forward to pod %s: %w", id, err)
	}
	u, err := streamURL(r.GetUrl())
	if err != nil {
		return err
	}
	d, err := o.stream.dialer(u)
	if err != nil {
		return err
	}
	pf, err := portforward.NewOnAddressesWithContext(c, d, o.addresses, o.ports, make(chan struct{}), s.out, s.errOut)
	if err != nil {
		return err
	}
	if err := pf.ForwardPorts(); err != nil && c.Err() == nil {
		return fmt.Errorf("port forward to pod %s: %w", id, err)
	}
	return nil
}

// dialer is the port-forward connection to the streaming server at u over the chosen transport.
func (f *streamFlags) dialer(u *url.URL) (httpstream.Dialer, error) {
	cfg, err := f.restConfig()
	if err != nil {
		return nil, err
	}
	switch f.transport {
	case transportSPDY:
		tr, upgrader, err := spdy.RoundTripperFor(cfg)
		if err != nil {
			return nil, err
		}
		return spdy.NewDialer(upgrader, &http.Client{Transport: tr}, http.MethodPost, u), nil
	case transportWebsocket:
		return portforward.NewSPDYOverWebsocketDialer(u, cfg)
	}
	return nil, fmt.Errorf("--transport %q: want spdy or websocket", f.transport)
}
