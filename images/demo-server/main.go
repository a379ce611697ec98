// Command demo-server is nodekit's demo workload and test target. Run as "demo-server" (or under any
// name that is not a toolbox command) it serves:
//
//   - HTTP on --port (default 8080, env PORT):
//     "/"      one text line: "demo-server <version> pod=<name> namespace=<ns> ip=<podIP> host=<hostname>";
//     "/json"  (or "/" with Accept: application/json) the same plus the environment as a JSON object;
//     "/healthz", "/readyz"  200 "ok" or 503 "not ok";
//     "POST /control/healthz?ok=false|true", "POST /control/readyz?ok=..."  flip those answers.
//     The files <control-dir>/healthz-fail and <control-dir>/readyz-fail (default /tmp) flip them too,
//     so `touch /tmp/healthz-fail` through exec works without HTTP.
//   - gRPC health (grpc.health.v1) on --grpc-port (default 9090): service "" follows /healthz, service
//     "readiness" follows /readyz.
//   - UDP echo on --udp-port (default 8081): every datagram is answered with the pod name.
//
// Pod identity comes from the downward-API env vars POD_NAME, POD_NAMESPACE and POD_IP. --slow-start
// delays listening (and so readiness); --exit-after/--exit-code simulate a crash; --termination-message
// is written to --termination-message-path (/dev/termination-log) at start; on SIGTERM it logs
// "received SIGTERM", turns unready, waits --term-delay and exits 0. A port of 0 disables that listener.
//
// Invoked as cat, echo, sleep, env, ls, touch, rm, true, false, hostname or sh (the image links /bin/<name>
// to this binary) it acts as that tool instead; see toolbox.go.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// defaultVersion is the version label baked in at build time (-X main.defaultVersion=v1).
var defaultVersion = "dev"

func main() {
	if tool, ok := toolboxCommand(os.Args); ok {
		os.Exit(tool(os.Args[1:]))
	}
	os.Exit(serve(os.Args[1:]))
}

// options are the server's flags.
type options struct {
	port, grpcPort, udpPort int
	version                 string
	controlDir              string
	slowStart, termDelay    time.Duration
	exitAfter               time.Duration
	exitCode                int
	// message, when set, is written to messageFile at start (a termination message).
	message, messageFile string
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("demo-server", flag.ContinueOnError)
	port := 8080
	if p, err := strconv.Atoi(os.Getenv("PORT")); err == nil {
		port = p
	}
	fs.IntVar(&o.port, "port", port, "HTTP port (env PORT); 0 disables HTTP")
	fs.IntVar(&o.grpcPort, "grpc-port", 9090, "gRPC health port; 0 disables it")
	fs.IntVar(&o.udpPort, "udp-port", 8081, "UDP echo port; 0 disables it")
	fs.StringVar(&o.version, "version", defaultVersion, "version label reported by /")
	fs.StringVar(&o.controlDir, "control-dir", "/tmp", "directory watched for healthz-fail and readyz-fail files")
	fs.DurationVar(&o.slowStart, "slow-start", 0, "wait this long before listening")
	fs.DurationVar(&o.termDelay, "term-delay", 0, "wait this long after SIGTERM before exiting")
	fs.DurationVar(&o.exitAfter, "exit-after", 0, "exit with --exit-code after this long (simulated crash)")
	fs.IntVar(&o.exitCode, "exit-code", 1, "exit code used by --exit-after")
	fs.StringVar(&o.message, "termination-message", "", "write this to --termination-message-path at start")
	fs.StringVar(&o.messageFile, "termination-message-path", "/dev/termination-log", "file --termination-message is written to")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, nil
}

// server holds the flippable health state.
type server struct {
	opts     options
	healthy  atomic.Bool
	ready    atomic.Bool
	started  atomic.Bool
	stopping atomic.Bool
	grpc     *health.Server
}

func (s *server) isHealthy() bool {
	return s.healthy.Load() && !exists(filepath.Join(s.opts.controlDir, "healthz-fail"))
}

func (s *server) isReady() bool {
	return s.started.Load() && !s.stopping.Load() && s.ready.Load() && !exists(filepath.Join(s.opts.controlDir, "readyz-fail"))
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func serve(args []string) int {
	log.SetFlags(log.LstdFlags | log.LUTC)
	log.SetOutput(os.Stdout)
	opts, err := parseFlags(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo-server:", err)
		return 2
	}
	if opts.message != "" {
		if err := os.WriteFile(opts.messageFile, []byte(opts.message), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "demo-server:", err)
			return 1
		}
	}
	s := &server{opts: opts, grpc: health.NewServer()}
	s.healthy.Store(true)
	s.ready.Store(true)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	if opts.exitAfter > 0 {
		time.AfterFunc(opts.exitAfter, func() {
			log.Printf("exiting after %v with code %d (--exit-after)", opts.exitAfter, opts.exitCode)
			os.Exit(opts.exitCode)
		})
	}
	log.Printf("demo-server %s starting pod=%s namespace=%s", opts.version, os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE"))
	if opts.slowStart > 0 {
		log.Printf("slow start: listening in %v", opts.slowStart)
		select {
		case <-time.After(opts.slowStart):
		case sig := <-sigs:
			log.Printf("received %s", sigName(sig))
			return 0
		}
	}
	if err := s.listen(); err != nil {
		log.Printf("error: %v", err)
		return 1
	}
	s.started.Store(true)
	go s.syncGRPCHealth()
	log.Printf("demo-server %s listening http=:%d grpc=:%d udp=:%d", opts.version, opts.port, opts.grpcPort, opts.udpPort)

	sig := <-sigs
	log.Printf("received %s", sigName(sig))
	s.stopping.Store(true)
	if opts.termDelay > 0 {
		log.Printf("terminating in %v (--term-delay)", opts.termDelay)
		time.Sleep(opts.termDelay)
	}
	log.Printf("exiting")
	return 0
}

func sigName(sig os.Signal) string {
	if sig == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}

// listen opens every enabled listener and serves it in the background.
func (s *server) listen() error {
	if s.opts.port > 0 {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(s.opts.port))
		if err != nil {
			return err
		}
		go http.Serve(l, s.handler())
	}
	if s.opts.grpcPort > 0 {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(s.opts.grpcPort))
		if err != nil {
			return err
		}
		gs := grpc.NewServer()
		healthpb.RegisterHealthServer(gs, s.grpc)
		go gs.Serve(l)
	}
	if s.opts.udpPort > 0 {
		pc, err := net.ListenPacket("udp", ":"+strconv.Itoa(s.opts.udpPort))
		if err != nil {
			return err
		}
		go udpEcho(pc, []byte(os.Getenv("POD_NAME")+"\n"))
	}
	return nil
}

// syncGRPCHealth mirrors the HTTP health state into the gRPC health server every 200 ms.
func (s *server) syncGRPCHealth() {
	status := func(ok bool) healthpb.HealthCheckResponse_ServingStatus {
		if ok {
			return healthpb.HealthCheckResponse_SERVING
		}
		return healthpb.HealthCheckResponse_NOT_SERVING
	}
	for {
		s.grpc.SetServingStatus("", status(s.isHealthy()))
		s.grpc.SetServingStatus("readiness", status(s.isReady()))
		time.Sleep(200 * time.Millisecond)
	}
}

func udpEcho(pc net.PacketConn, reply []byte) {
	buf := make([]byte, 2048)
	for {
		_, addr, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		pc.WriteTo(reply, addr)
	}
}

// identity is what "/" reports.
type identity struct {
	Version   string            `json:"version"`
	Pod       string            `json:"pod"`
	Namespace string            `json:"namespace"`
	PodIP     string            `json:"podIP"`
	Hostname  string            `json:"hostname"`
	Env       map[string]string `json:"env"`
}

func (s *server) identity() identity {
	host, _ := os.Hostname()
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return identity{Version: s.opts.version, Pod: os.Getenv("POD_NAME"), Namespace: os.Getenv("POD_NAMESPACE"),
		PodIP: os.Getenv("POD_IP"), Hostname: host, Env: env}
}

func (id identity) line() string {
	return fmt.Sprintf("demo-server %s pod=%s namespace=%s ip=%s host=%s\n", id.Version, id.Pod, id.Namespace, id.PodIP, id.Hostname)
}

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept"), "application/json") {
			writeJSON(w, s.identity())
			return
		}
		fmt.Fprint(w, s.identity().line())
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, s.identity()) })
	mux.HandleFunc("/env", func(w http.ResponseWriter, r *http.Request) {
		env := os.Environ()
		sort.Strings(env)
		fmt.Fprintln(w, strings.Join(env, "\n"))
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { answer(w, s.isHealthy()) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) { answer(w, s.isReady()) })
	mux.HandleFunc("POST /control/{check}", func(w http.ResponseWriter, r *http.Request) {
		ok, err := strconv.ParseBool(r.URL.Query().Get("ok"))
		if err != nil {
			http.Error(w, "ok: want true or false", http.StatusBadRequest)
			return
		}
		switch r.PathValue("check") {
		case "healthz":
			s.healthy.Store(ok)
		case "readyz":
			s.ready.Store(ok)
		default:
			http.Error(w, "unknown check: want healthz or readyz", http.StatusNotFound)
			return
		}
		log.Printf("control: %s ok=%v", r.PathValue("check"), ok)
		fmt.Fprintf(w, "%s ok=%v\n", r.PathValue("check"), ok)
	})
	return mux
}

func answer(w http.ResponseWriter, ok bool) {
	if !ok {
		http.Error(w, "not ok", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
