package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nodekit/nodekit/cni/cnitest"
	"github.com/nodekit/nodekit/cni/netconf"
)

// startup compares process start-up, the fixed cost the runtime pays on every CNI call: n execs of
// nodekit-cni answering VERSION against n execs of `nodekit version`, plus the package-init time Go
// reports with GODEBUG=inittrace=1.
func startup(n int, bigBin string) error {
	binDir, err := cnitest.BinDir()
	if err != nil {
		return err
	}
	small := exec.Command(filepath.Join(binDir, netconf.PluginType))
	small.Env = append(os.Environ(), "CNI_COMMAND=VERSION")
	small.Stdin = strings.NewReader(`{"cniVersion":"1.1.0"}`)
	big := exec.Command(bigBin, "version")
	fmt.Printf("process start-up, %d execs each (median wall time; init = sum of inittrace clock)\n\n", n)
	fmt.Printf("%-28s %10s %10s %8s %10s\n", "binary", "exec", "init", "pkgs", "size")
	var med []time.Duration
	for _, c := range []*exec.Cmd{small, big} {
		var ds []time.Duration
		for range n {
			r := clone(c)
			t0 := time.Now()
			if err := r.Run(); err != nil {
				return fmt.Errorf("%s: %w", c.Path, err)
			}
			ds = append(ds, time.Since(t0))
		}
		m, _, _ := stats(ds)
		med = append(med, m)
		initTime, pkgs, err := inittrace(c)
		if err != nil {
			return err
		}
		st, err := os.Stat(c.Path)
		if err != nil {
			return err
		}
		fmt.Printf("%-28s %10s %10s %8d %9.1fM\n", filepath.Base(c.Path), round(m), round(initTime), pkgs, float64(st.Size())/1e6)
	}
	fmt.Printf("%-28s %10.2fx\n", "ratio nodekit-cni/nodekit", float64(med[0])/float64(med[1]))
	return nil
}

func clone(c *exec.Cmd) *exec.Cmd {
	r := exec.Command(c.Path, c.Args[1:]...)
	r.Env = c.Env
	if c.Stdin != nil {
		r.Stdin = strings.NewReader(`{"cniVersion":"1.1.0"}`)
	}
	return r
}

// inittrace runs c once with GODEBUG=inittrace=1 and sums the "@… ms, X ms clock" of every init line.
func inittrace(c *exec.Cmd) (time.Duration, int, error) {
	r := clone(c)
	r.Env = append(append([]string{}, c.Env...), "GODEBUG=inittrace=1")
	if c.Env == nil {
		r.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	}
	var stderr bytes.Buffer
	r.Stderr = &stderr
	if err := r.Run(); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", c.Path, err)
	}
	var total float64
	pkgs := 0
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// init <pkg> @<t> ms, <clock> ms clock, …
		if len(f) >= 7 && f[0] == "init" && f[6] == "clock," {
			if v, err := strconv.ParseFloat(f[4], 64); err == nil {
				total += v
				pkgs++
			}
		}
	}
	return time.Duration(total * float64(time.Millisecond)), pkgs, nil
}
