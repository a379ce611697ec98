// Package crictl is nodekit's debugging CLI for CRI runtimes, command- and output-compatible with upstream
// crictl v1.37 (sigs.k8s.io/cri-tools): the same commands, flags, table columns and -o json|yaml|
// go-template documents, the same /etc/crictl.yaml and CONTAINER_RUNTIME_ENDPOINT/IMAGE_SERVICE_ENDPOINT
// resolution. It talks to the runtime only through runtime/cri (CRI v1 gRPC) and, for exec/attach/
// port-forward, through the runtime's streaming server (client-go remotecommand and portforward).
//
// Files follow cri-tools' grouping: runtime.go (version, info), pods.go, containers.go, images.go,
// logs.go, streaming.go (exec, attach, port-forward), stats.go, events.go, load.go; output.go holds the
// shared table/json/yaml/go-template formatting and ids.go the ID-prefix resolution. As in cri-tools,
// each command is an options struct (or none) and a verb that takes the CRI client (criClient) and the
// output streams, so it runs without cobra; the cobra command only binds flags to the options and calls
// the verb through app.runE, the one place that connects to the runtime. Errors go back to the caller:
// an exec'd command's exit status comes back as *ExitError, and nothing here exits the process.
package crictl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/grpclog"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/containerd"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/version"
)

// defaultTimeout is upstream crictl's --timeout default: the deadline of each CRI call.
const defaultTimeout = 2 * time.Second

// defaultMaxRetries is upstream crictl's --max-retries default.
const defaultMaxRetries = 3

// defaultConfigPath is where upstream crictl looks for its configuration on Linux.
const defaultConfigPath = "/etc/crictl.yaml"

// defaultDataDir is nodekit's default --data-dir; its managed containerd listens on
// <data-dir>/containerd/containerd.sock.
const defaultDataDir = "/var/lib/nodekit"

// defaultRuntimeEndpoints are tried in order, after nodekit's own managed containerd, when no endpoint
// is configured; the first whose socket exists is used (upstream tries the same list).
var defaultRuntimeEndpoints = []string{
	"unix:///run/containerd/containerd.sock",
	"unix:///run/crio/crio.sock",
	"unix:///var/run/cri-dockerd.sock",
}

// app is one crictl invocation: its global flags, streams, resolved configuration and the lazily
// dialled CRI client.
type app struct {
	configPath      string
	runtimeEndpoint string
	imageEndpoint   string
	timeout         time.Duration
	debug           bool
	dataDir         string
	maxRetries      int
	profileCPU      string
	profileMem      string

	streams

	cfg settings
	// explicitEndpoint is set when the runtime endpoint comes from a flag, the environment or the
	// config file rather than the defaults.
	explicitEndpoint bool
	client           *cri.Client
}

// streams are a command's standard streams.
type streams struct {
	in          io.Reader
	out, errOut io.Writer
}

// criClient is the CRI connection a verb works with: the runtime's RuntimeService and ImageService, as
// runtime/cri's Client serves them (tests pass fakes).
type criClient struct {
	rt  runtimeapi.RuntimeServiceClient
	img runtimeapi.ImageServiceClient
}

// verbFunc carries out one command with the connected client and the command's positional arguments.
type verbFunc func(c context.Context, cl criClient, args []string) error

// runE is the RunE of every CRI command: it connects to the runtime (lazily dialled, so an unreachable
// runtime is reported by the verb's first call) and runs the verb with the command's context.
func (a *app) runE(run verbFunc) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := applyEnv(cmd.Flags()); err != nil {
			return err
		}
		c, err := a.conn(ctx(cmd))
		if err != nil {
			return err
		}
		return run(ctx(cmd), criClient{rt: c.Runtime(), img: c.Image()}, args)
	}
}

// untilSignal runs a verb with a context that SIGINT and SIGTERM cancel: the streaming and following
// commands end cleanly on Ctrl-C.
func untilSignal(run verbFunc) verbFunc {
	return func(c context.Context, cl criClient, args []string) error {
		c, cancel := interruptible(c)
		defer cancel()
		return run(c, cl, args)
	}
}

// interruptible returns c cancelled on SIGINT and SIGTERM.
func interruptible(c context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(c, os.Interrupt, syscall.SIGTERM)
}

// NewCommand returns the `crictl` command. Like upstream, global flags (-r, -i, -t, -D, -c) go before the
// subcommand name and subcommands have their own flags, some reusing those letters (exec -i -t,
// logs -t, ps -r); so the command parses its global flags itself and then runs the subcommand tree.
// It reads its streams from cobra (SetIn/SetOut/SetErr), so it can run in-process in tests. Errors are
// single lines; a runtime that cannot be reached yields "runtime not reachable at ENDPOINT: REASON".
func NewCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "crictl [global flags] COMMAND [flags]",
		Short:              "A CRI debugging client compatible with upstream crictl v1.37",
		DisableFlagParsing: true,
		SilenceUsage:       true,
		SilenceErrors:      true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return Run(ctx(cmd), args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
}

// ExitError is an error with the exit status the crictl process should end with. exec returns one with
// the status of the command it ran in a container when that is not 0 (and Err nil: the command's own
// output said what happened), as upstream crictl exits with it.
type ExitError struct {
	// Code is the process exit status, 1 to 255.
	Code int
	// Err is what failed; nil when Code is a remote command's status.
	Err error
}

func (e *ExitError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return fmt.Sprintf("command exited with status %d", e.Code)
}

func (e *ExitError) Unwrap() error { return e.Err }

// Exit turns what Run or NewCommand's command returned into the process exit status, writing the error
// to w as one "name: error" line: 0 for nil; an *ExitError's Code (silently when its Err is nil);
// 1 for any other error (an unreachable runtime, bad input). main calls os.Exit with the result.
func Exit(w io.Writer, name string, err error) int {
	if err == nil {
		return 0
	}
	code := 1
	var ee *ExitError
	if errors.As(err, &ee) {
		code = ee.Code
		if ee.Err == nil {
			return code
		}
	}
	fmt.Fprintf(w, "%s: %v\n", name, err)
	return code
}

// Run executes one crictl invocation in-process: args are what follows "crictl" on the command line
// (global flags, subcommand, its flags and arguments). Output goes to stdout and stderr. It returns
// *ExitError when an exec'd command exits non-zero, and an error (one line for an unreachable runtime)
// when the command fails; Exit maps either to the process exit status.
func Run(c context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	a := &app{streams: streams{in: stdin, out: stdout, errOut: stderr}}
	return a.run(c, args)
}

// run parses the global flags in args, resolves the configuration and executes the subcommand.
func (a *app) run(c context.Context, args []string) error {
	tree := a.tree()
	tree.SetIn(a.in)
	tree.SetOut(a.out)
	tree.SetErr(a.errOut)
	fs := tree.Flags()
	fs.SetInterspersed(false)
	if err := fs.Parse(singleDashLong(fs, args)); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return tree.Help()
		}
		if hint := notHereHint("crictl", err); hint != "" {
			return fmt.Errorf("%w (not in nodekit's crictl: %s)", err, hint)
		}
		return err
	}
	if v, _ := fs.GetBool("version"); v {
		_, err := fmt.Fprintf(a.out, "crictl version %s\n", tree.Version)
		return err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return tree.Help()
	}
	if err := a.resolve(fs, rest[0] == "config"); err != nil {
		return err
	}
	defer a.close()
	stop, err := a.startProfiles()
	if err != nil {
		return err
	}
	if sub, _, err := tree.Find(rest); err == nil && sub != tree {
		rest = singleDashLong(sub.Flags(), rest)
	}
	tree.SetArgs(rest)
	err = tree.ExecuteContext(c)
	return errors.Join(err, stop())
}

// tree builds the subcommand tree; the global flags are the root's local flags.
func (a *app) tree() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "crictl",
		Short: "A CRI debugging client compatible with upstream crictl v1.37",
		Long: "crictl inspects and pokes a CRI runtime: pods, containers, images, logs, exec, stats, events.\n" +
			"Endpoints come from --runtime-endpoint/--image-endpoint, CONTAINER_RUNTIME_ENDPOINT/\n" +
			"IMAGE_SERVICE_ENDPOINT, or the config file (" + defaultConfigPath + ").",
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		// `crictl --version`, like upstream's "crictl version v1.37.0".
		Version: version.Version + " (nodekit; compatible with crictl v1.37)",
	}
	cmd.SetVersionTemplate("crictl version {{.Version}}\n")
	pf := cmd.Flags()
	pf.StringVarP(&a.configPath, "config", "c", defaultConfigPath, "location of the client config file; if the default does not exist, the program's directory is searched as well")
	pf.StringVarP(&a.runtimeEndpoint, "runtime-endpoint", "r", "", "endpoint of the CRI runtime service")
	pf.StringVarP(&a.imageEndpoint, "image-endpoint", "i", "", "endpoint of the CRI image service (default: the runtime endpoint)")
	withEnv(pf, "config", "CRI_CONFIG_FILE")
	withEnv(pf, "runtime-endpoint", "CONTAINER_RUNTIME_ENDPOINT")
	withEnv(pf, "image-endpoint", "IMAGE_SERVICE_ENDPOINT")
	pf.DurationVarP(&a.timeout, "timeout", "t", defaultTimeout, "timeout of each CRI call (e.g. 2s, 20s); 0 or less means the default")
	pf.BoolVarP(&a.debug, "debug", "D", false, "enable debug logging")
	pf.IntVar(&a.maxRetries, "max-retries", defaultMaxRetries, "retries, with exponential back-off from 500 ms to 5 s, of connecting to an explicitly set endpoint (0 disables, negative retries forever)")
	pf.StringVar(&a.profileCPU, "profile-cpu", "", "write a pprof CPU profile of the command to this path")
	pf.StringVar(&a.profileMem, "profile-mem", "", "write a pprof memory (heap) profile to this path when the command ends")
	pf.BoolP("version", "v", false, "print the version")
	// nodekit's own global flags may precede the subcommand too (`nodekit --data-dir X crictl ps`);
	// --data-dir locates the managed containerd when no endpoint is configured.
	pf.StringVar(&a.dataDir, "data-dir", defaultDataDir, "nodekit's data directory: its managed containerd is the default runtime endpoint")
	pf.String("log-level", "info", "nodekit's log level (crictl logs at debug level with --debug)")
	pf.Bool("log-json", false, "nodekit's JSON logging switch (unused by crictl)")
	for _, name := range []string{"log-level", "log-json"} {
		pf.MarkHidden(name)
	}

	cmd.AddCommand(
		a.versionCommand(), a.infoCommand(),
		a.imagesCommand(), a.inspectiCommand(), a.pullCommand(), a.rmiCommand(), a.imagefsinfoCommand(), a.loadCommand(),
		a.podsCommand(), a.runpCommand(), a.inspectpCommand(), a.stoppCommand(), a.rmpCommand(),
		a.psCommand(), a.createCommand(), a.startCommand(), a.stopCommand(), a.rmCommand(), a.inspectCommand(),
		a.updateCommand(), a.logsCommand(),
		a.execCommand(), a.attachCommand(), a.portForwardCommand(),
		a.statsCommand(), a.statspCommand(), a.eventsCommand(),
		a.runCommand(), a.checkpointCommand(), a.metricspCommand(), a.metricdescsCommand(),
		a.runtimeConfigCommand(), a.updateRuntimeConfigCommand(), a.configCommand(), a.completionCommand(cmd),
	)
	for _, c := range cmd.Commands() {
		c.RunE = oneLineErrors(c.RunE)
		c.SetFlagErrorFunc(flagError)
	}
	return cmd
}

// oneLineErrors keeps an unreachable runtime's error as the bare "runtime not reachable at ..." line,
// without the command context other errors carry.
func oneLineErrors(run func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	if run == nil {
		return nil
	}
	return func(cmd *cobra.Command, args []string) error {
		err := run(cmd, args)
		var ue *cri.UnreachableError
		if errors.As(err, &ue) {
			return ue
		}
		return err
	}
}

// flagError is the flag error function of the subcommands: an upstream flag nodekit's crictl lacks
// gets the reason (notHere).
func flagError(cmd *cobra.Command, err error) error {
	if hint := notHereHint(cmd.CommandPath(), err); hint != "" {
		return fmt.Errorf("%w (not in nodekit's crictl: %s)", err, hint)
	}
	return err
}

// resolve merges flags, environment (applyEnv sets the flags from it) and the config file into a.cfg
// (flags and environment win over the file, as in upstream) and sets up logging. A missing config file
// that --config names is an error, except for the config command (creating the file is its job).
func (a *app) resolve(flags *pflag.FlagSet, configCommand bool) error {
	if err := applyEnv(flags); err != nil {
		return err
	}
	configSet := flags.Changed("config")
	file, err := readSettings(a.configPath)
	if errors.Is(err, os.ErrNotExist) && !configSet {
		// Upstream also looks next to the executable when the default file is missing.
		if exe, xerr := os.Executable(); xerr == nil {
			file, err = readSettings(filepath.Join(filepath.Dir(exe), "crictl.yaml"))
		}
	}
	fromFile := err == nil
	switch {
	case err == nil:
	case errors.Is(err, os.ErrNotExist) && (!configSet || configCommand):
		file = settings{}
	default:
		return err
	}
	a.cfg = file
	// An endpoint is explicitly set when the flags, the environment or the file name it; only then
	// are connections retried (upstream's rule).
	a.explicitEndpoint = a.cfg.RuntimeEndpoint != ""
	if flags.Changed("runtime-endpoint") {
		a.cfg.RuntimeEndpoint, a.explicitEndpoint = a.runtimeEndpoint, true
	}
	if flags.Changed("image-endpoint") {
		a.cfg.ImageEndpoint = a.imageEndpoint
	}
	// Without a config file the flag's default (3) applies; a file that does not set max-retries
	// means 0, as upstream reads it.
	if flags.Changed("max-retries") || !fromFile {
		a.cfg.MaxRetries = a.maxRetries
	}
	switch {
	case flags.Changed("timeout"):
		a.cfg.Timeout = a.timeout
	case a.cfg.Timeout <= 0:
		a.cfg.Timeout = defaultTimeout
	}
	if a.cfg.Timeout <= 0 {
		a.cfg.Timeout = defaultTimeout
	}
	if flags.Changed("debug") {
		a.cfg.Debug = a.debug
	}
	level := slog.LevelWarn
	if a.cfg.Debug {
		level = slog.LevelDebug
	}
	// gRPC's transport chatter (and whatever logger another package of the binary installed for it)
	// would add lines to a failing command's one-line error; show it only with --debug.
	grpcOut := io.Discard
	if a.cfg.Debug {
		grpcOut = a.errOut
	}
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(grpcOut, grpcOut, grpcOut))
	slog.SetDefault(slog.New(slog.NewTextHandler(a.errOut, &slog.HandlerOptions{Level: level})))
	return nil
}

// endpoint returns the runtime endpoint to use: the configured one, else the first default whose socket
// exists (nodekit's managed containerd first).
func (a *app) endpoint() (string, error) {
	if a.cfg.RuntimeEndpoint != "" {
		return a.cfg.RuntimeEndpoint, nil
	}
	managed := "unix://" + containerd.SocketPath(containerd.DirIn(cmp.Or(a.dataDir, defaultDataDir)))
	for _, ep := range append([]string{managed}, defaultRuntimeEndpoints...) {
		if p, err := cri.ParseEndpoint(ep); err == nil {
			if _, err := os.Stat(p); err == nil {
				slog.Debug("no runtime endpoint configured; using a default one", "endpoint", ep)
				return ep, nil
			}
		}
	}
	return "", fmt.Errorf("no runtime endpoint configured (--runtime-endpoint, CONTAINER_RUNTIME_ENDPOINT or %s) and none of the defaults %v exists", defaultConfigPath, append([]string{managed}, defaultRuntimeEndpoints...))
}

// conn returns the CRI client, dialling on first use. Dialling is lazy (no Version round trip); an
// unreachable runtime is reported by the first call. For an explicitly set endpoint, the sockets are
// first waited for (waitForSockets) up to max-retries times.
func (a *app) conn(ctx context.Context) (*cri.Client, error) {
	if a.client != nil {
		return a.client, nil
	}
	ep, err := a.endpoint()
	if err != nil {
		return nil, err
	}
	if a.explicitEndpoint && a.cfg.MaxRetries != 0 {
		if err := waitForSockets(ctx, a.cfg.MaxRetries, ep, a.cfg.ImageEndpoint); err != nil {
			return nil, err
		}
	}
	opts := []cri.Option{cri.WithTimeout(a.cfg.Timeout), cri.WithoutVersionCheck(), cri.WithPullTimeout(0)}
	if a.cfg.ImageEndpoint != "" {
		opts = append(opts, cri.WithImageEndpoint(a.cfg.ImageEndpoint))
	}
	c, err := cri.Dial(context.Background(), ep, opts...)
	if err != nil {
		return nil, err
	}
	slog.Debug("connected", "endpoint", c.Endpoint(), "imageEndpoint", c.ImageEndpoint(), "timeout", a.cfg.Timeout)
	a.client = c
	return c, nil
}

// startProfiles starts the CPU profile (--profile-cpu); the returned function stops it and writes the
// heap profile (--profile-mem). Errors name the flag and the file.
func (a *app) startProfiles() (stop func() error, err error) {
	var cpu *os.File
	if a.profileCPU != "" {
		if cpu, err = os.Create(a.profileCPU); err != nil {
			return nil, fmt.Errorf("--profile-cpu: %w", err)
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			cpu.Close()
			return nil, fmt.Errorf("--profile-cpu %s: %w", a.profileCPU, err)
		}
	}
	return func() error {
		var errs []error
		if cpu != nil {
			pprof.StopCPUProfile()
			errs = append(errs, cpu.Close())
		}
		if a.profileMem != "" {
			errs = append(errs, writeHeapProfile(a.profileMem))
		}
		return errors.Join(errs...)
	}, nil
}

// writeHeapProfile writes a pprof heap profile, after a GC so that it is up to date, to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--profile-mem: %w", err)
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("--profile-mem %s: %w", path, err)
	}
	return f.Close()
}

// close closes the CRI connection if one was dialled.
func (a *app) close() error {
	if a.client == nil {
		return nil
	}
	err := a.client.Close()
	a.client = nil
	return err
}

// ctx returns the command's context (never nil).
func ctx(cmd *cobra.Command) context.Context {
	if c := cmd.Context(); c != nil {
		return c
	}
	return context.Background()
}
