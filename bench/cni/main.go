// Command cni-bench measures pod network ADD+DEL latency of nodekit-cni against Debian's reference
// bridge + host-local (+ portmap) plugins from /usr/lib/cni, in the same run, on the same simulated node
// set-up, and prints the two side by side with their ratio (goal: nodekit ≤ 1.0× the reference).
//
// Each plugin set runs on its own simulated node (test/framework/netns), driven through libcni exactly as
// a runtime drives it. Pod network namespaces are created before the clock starts; only ADD and DEL are
// timed. Iterations alternate between the two so load on the shared machine affects both alike.
//
// With -nodekit-bin it also compares process start-up (exec wall time and Go package-init time from
// GODEBUG=inittrace=1) of nodekit-cni with the nodekit binary, the fixed cost every CNI call would pay if
// the plugin were a mode of the big binary.
//
//	go run ./bench/cni -n 100
//	go build -o /tmp/nodekit ./cmd/nodekit && go run ./bench/cni -n 50 -nodekit-bin /tmp/nodekit
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/nodekit/nodekit/cni/cnitest"
	"github.com/nodekit/nodekit/cni/config"
	"github.com/nodekit/nodekit/test/framework/netns"
)

type variant struct {
	name     string
	rt       *cnitest.Runtime
	node     *netns.Node
	add, del []time.Duration
}

func main() {
	n := flag.Int("n", 50, "ADD+DEL iterations per plugin set")
	refDir := flag.String("ref-bin-dir", "/usr/lib/cni", "directory of the reference bridge, host-local and portmap plugins")
	refMasq := flag.Bool("ref-ipmasq", true, "enable ipMasq in the reference bridge (nodekit always masquerades)")
	bigBin := flag.String("nodekit-bin", "", "also compare the plugin's process start-up with this nodekit binary's (`nodekit version`)")
	flag.Parse()
	err := run(*n, *refDir, *refMasq)
	if err == nil && *bigBin != "" {
		err = startup(*n, *bigBin)
	}
	cnitest.Cleanup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cni-bench:", err)
		os.Exit(1)
	}
}

func run(n int, refDir string, refMasq bool) error {
	if n < 1 || n > 1000 {
		return fmt.Errorf("-n %d is outside 1..1000", n)
	}
	binDir, err := cnitest.BinDir()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "nodekit-cni-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	lab, err := netns.New(netns.Options{})
	if err != nil {
		return err
	}
	defer lab.Close()

	nkConf, err := config.Render(config.Options{
		NetworkName: "nk-bench", PodCIDR: "10.244.1.0/24", ClusterCIDR: "10.244.0.0/16",
		Bridge: "nkbench0", DataDir: filepath.Join(tmp, "nodekit-ipam"),
	})
	if err != nil {
		return err
	}
	refConf := []byte(fmt.Sprintf(`{"cniVersion":"1.0.0","name":"ref-bench","plugins":[
  {"type":"bridge","bridge":"refbench0","isGateway":true,"ipMasq":%t,"hairpinMode":true,"mtu":1500,
   "ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.1.0/24"}]],"dataDir":%q}},
  {"type":"portmap","capabilities":{"portMappings":true}}]}`, refMasq, filepath.Join(tmp, "ref-ipam")))

	var vs []*variant
	for _, c := range []struct {
		name string
		conf []byte
		bin  string
	}{{"nodekit-cni", nkConf, binDir}, {"bridge+host-local+portmap", refConf, refDir}} {
		rt, err := cnitest.NewRuntime(c.conf, filepath.Join(tmp, "cache-"+c.name), c.bin)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		node, err := lab.AddNode(c.name)
		if err != nil {
			return err
		}
		vs = append(vs, &variant{name: c.name, rt: rt, node: node})
	}

	// Namespaces first, outside the measurement.
	pods := make([][]ns.NetNS, len(vs))
	for i := range vs {
		for range n {
			p, err := lab.NewPodNS()
			if err != nil {
				return err
			}
			pods[i] = append(pods[i], p)
		}
	}
	ctx := context.Background()
	// One warm-up round each: creates the bridges and node-level rules, as the first pod on a node does.
	for i, v := range vs {
		if err := v.cycle(ctx, pods[i][0], "warmup", false); err != nil {
			return err
		}
	}
	for it := range n {
		for i, v := range vs {
			if err := v.cycle(ctx, pods[i][it], fmt.Sprintf("bench-%d", it), true); err != nil {
				return err
			}
		}
	}

	fmt.Printf("CNI ADD+DEL latency, %d iterations, pod netns creation excluded (%d CPUs)\n\n", n, runtime.NumCPU())
	fmt.Printf("%-10s %-28s %10s %10s %10s\n", "op", "plugins", "median", "p90", "mean")
	for _, op := range []string{"ADD", "DEL", "ADD+DEL"} {
		var med []time.Duration
		for _, v := range vs {
			d := v.samples(op)
			m, p90, mean := stats(d)
			med = append(med, m)
			fmt.Printf("%-10s %-28s %10s %10s %10s\n", op, v.name, round(m), round(p90), round(mean))
		}
		fmt.Printf("%-10s %-28s %10.2fx\n\n", op, "ratio nodekit/reference", float64(med[0])/float64(med[1]))
	}
	return nil
}

func (v *variant) cycle(ctx context.Context, pod ns.NetNS, id string, record bool) error {
	rc := cnitest.Attachment(id, pod.Path(), "eth0", nil)
	return v.node.Do(func() error {
		t0 := time.Now()
		if _, err := v.rt.Add(ctx, rc); err != nil {
			return fmt.Errorf("%s ADD: %w", v.name, err)
		}
		t1 := time.Now()
		if err := v.rt.Del(ctx, rc); err != nil {
			return fmt.Errorf("%s DEL: %w", v.name, err)
		}
		t2 := time.Now()
		if record {
			v.add = append(v.add, t1.Sub(t0))
			v.del = append(v.del, t2.Sub(t1))
		}
		return nil
	})
}

func (v *variant) samples(op string) []time.Duration {
	switch op {
	case "ADD":
		return v.add
	case "DEL":
		return v.del
	}
	out := make([]time.Duration, len(v.add))
	for i := range v.add {
		out[i] = v.add[i] + v.del[i]
	}
	return out
}

func stats(d []time.Duration) (median, p90, mean time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	var sum time.Duration
	for _, x := range s {
		sum += x
	}
	return s[len(s)/2], s[len(s)*9/10], sum / time.Duration(len(s))
}

func round(d time.Duration) string { return d.Round(10 * time.Microsecond).String() }
