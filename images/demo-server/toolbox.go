package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The toolbox makes exec and exec-probe tests work in an image without a shell or coreutils: the image
// links /bin/<name> to this binary and argv[0] selects the tool. Each tool implements the common subset
// of its coreutils namesake documented on its function; anything else is an error with exit code 2.
var tools map[string]func(args []string) int

func init() {
	// Keep in step with bundled.Toolbox (TestToolboxDispatch checks).
	tools = map[string]func([]string) int{
		"cat": cat, "echo": echo, "sleep": sleep, "env": env, "ls": ls, "touch": touch, "rm": rm,
		"true": func([]string) int { return 0 }, "false": func([]string) int { return 1 },
		"hostname": hostname, "sh": sh, "ln": ln, "nslookup": nslookup, "getent": getent,
	}
}

// toolboxCommand picks the tool named by argv[0]'s base name.
func toolboxCommand(argv []string) (func([]string) int, bool) {
	if len(argv) == 0 {
		return nil, false
	}
	t, ok := tools[filepath.Base(argv[0])]
	return t, ok
}

func fail(tool string, err error) int {
	fmt.Fprintf(os.Stderr, "%s: %v\n", tool, err)
	return 1
}

// cat [FILE...]: copies each file (or stdin, also for "-") to stdout.
func cat(args []string) int {
	if len(args) == 0 {
		args = []string{"-"}
	}
	code := 0
	for _, a := range args {
		var r io.Reader = os.Stdin
		if a != "-" {
			f, err := os.Open(a)
			if err != nil {
				code = fail("cat", err)
				continue
			}
			defer f.Close()
			r = f
		}
		if _, err := io.Copy(os.Stdout, r); err != nil {
			code = fail("cat", err)
		}
	}
	return code
}

// echo [-n] [ARG...]: prints the arguments separated by spaces.
func echo(args []string) int {
	nl := "\n"
	if len(args) > 0 && args[0] == "-n" {
		nl, args = "", args[1:]
	}
	fmt.Print(strings.Join(args, " ") + nl)
	return 0
}

// sleep SECONDS|DURATION|infinity: sleeps (SECONDS may be fractional; DURATION like "1m30s").
func sleep(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "sleep: usage: sleep SECONDS|DURATION|infinity")
		return 2
	}
	if args[0] == "infinity" {
		select {}
	}
	d, err := time.ParseDuration(args[0])
	if err != nil {
		f, ferr := strconv.ParseFloat(args[0], 64)
		if ferr != nil {
			return fail("sleep", fmt.Errorf("invalid time interval %q", args[0]))
		}
		d = time.Duration(f * float64(time.Second))
	}
	time.Sleep(d)
	return 0
}

// env: prints the environment, one VAR=value per line.
func env(args []string) int {
	if len(args) > 0 {
		fmt.Fprintln(os.Stderr, "env: running a command is not supported")
		return 2
	}
	for _, kv := range os.Environ() {
		fmt.Println(kv)
	}
	return 0
}

// ls [-a] [-l] [-1] [PATH...]: lists directory entries (names, one per line; -l adds mode and size),
// or the path itself for a file.
func ls(args []string) int {
	all, long := false, false
	var paths []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			all = all || strings.Contains(a, "a")
			long = long || strings.Contains(a, "l")
			continue
		}
		paths = append(paths, a)
	}
	if len(paths) == 0 {
		paths = []string{"."}
	}
	code := 0
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			code = fail("ls", err)
			continue
		}
		print := func(fi os.FileInfo) {
			if long {
				fmt.Printf("%s %10d %s\n", fi.Mode(), fi.Size(), fi.Name())
			} else {
				fmt.Println(fi.Name())
			}
		}
		if !fi.IsDir() {
			print(fi)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			code = fail("ls", err)
			continue
		}
		for _, e := range entries {
			if !all && strings.HasPrefix(e.Name(), ".") {
				continue
			}
			if info, err := e.Info(); err == nil {
				print(info)
			}
		}
	}
	return code
}

// ln -s TARGET LINK: creates the symbolic link LINK pointing to TARGET (only symbolic links).
func ln(args []string) int {
	if len(args) != 3 || args[0] != "-s" {
		fmt.Fprintln(os.Stderr, "ln: usage: ln -s TARGET LINK")
		return 2
	}
	if err := os.Symlink(args[1], args[2]); err != nil {
		return fail("ln", err)
	}
	return 0
}

// touch FILE...: creates each file or sets its times to now.
func touch(args []string) int {
	code := 0
	now := time.Now()
	for _, a := range args {
		f, err := os.OpenFile(a, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			code = fail("touch", err)
			continue
		}
		f.Close()
		if err := os.Chtimes(a, now, now); err != nil {
			code = fail("touch", err)
		}
	}
	return code
}

// rm [-f] [-r] FILE...: removes files (-r: directories too; -f: no error for missing files).
func rm(args []string) int {
	force, recursive := false, false
	code := 0
	for _, a := range args {
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			force = force || strings.Contains(a, "f")
			recursive = recursive || strings.ContainsAny(a, "rR")
			continue
		}
		var err error
		if recursive {
			if _, serr := os.Lstat(a); serr != nil {
				err = serr
			} else {
				err = os.RemoveAll(a)
			}
		} else {
			err = os.Remove(a)
		}
		if err != nil && !(force && os.IsNotExist(err)) {
			code = fail("rm", err)
		}
	}
	return code
}

// hostname: prints the host name (the pod's hostname inside a pod).
func hostname(args []string) int {
	h, err := os.Hostname()
	if err != nil {
		return fail("hostname", err)
	}
	fmt.Println(h)
	return 0
}

// sh -c "COMMAND [ARG...]": a minimal shell that runs ONE simple command. Words are split on blanks;
// single and double quotes group words; $VAR and ${VAR} expand outside single quotes; a leading "exec"
// is ignored. Pipes, redirections, ;, &&, ||, globs, subshells and builtins other than the toolbox are
// NOT supported: such a command fails with exit code 2 and says so. Toolbox commands run in-process;
// other commands are looked up in PATH and exec'd. With no -c, sh reads the first line of stdin as the
// command. The one compound command it knows is the busy loop "while :; do :; done" (or "while true;
// do :; done"), which spins one CPU until the process is killed (a CPU load for autoscaling tests).
func sh(args []string) int {
	var script string
	switch {
	case len(args) >= 2 && args[0] == "-c":
		script = args[1]
	case len(args) == 0:
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil && err != io.EOF {
			return fail("sh", err)
		}
		script = line
	default:
		fmt.Fprintln(os.Stderr, `sh: usage: sh -c "COMMAND [ARG...]" (a single simple command)`)
		return 2
	}
	if busyLoop(script) {
		for {
		}
	}
	words, err := splitWords(script)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sh: %v (this sh runs a single simple command only)\n", err)
		return 2
	}
	if len(words) > 0 && words[0] == "exec" {
		words = words[1:]
	}
	if len(words) == 0 {
		return 0
	}
	if t, ok := tools[words[0]]; ok {
		return t(words[1:])
	}
	if t, ok := toolboxCommand(words); ok {
		return t(words[1:])
	}
	path, err := exec.LookPath(words[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "sh: %s: not found\n", words[0])
		return 127
	}
	err = syscall.Exec(path, words, os.Environ())
	return fail("sh", err)
}

// busyLoop reports whether script is "while :; do :; done" or "while true; do :; done", blanks aside.
func busyLoop(script string) bool {
	s := strings.Join(strings.Fields(script), " ")
	return s == "while :; do :; done" || s == "while true; do :; done"
}

// splitWords splits a simple command line into words (see sh).
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			flush()
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			end := strings.IndexByte(s[i+1:], '"')
			if end < 0 {
				return nil, fmt.Errorf("unterminated double quote")
			}
			cur.WriteString(os.ExpandEnv(s[i+1 : i+1+end]))
			i += end + 1
			inWord = true
		case c == '$':
			j := i + 1
			if j < len(s) && s[j] == '{' {
				end := strings.IndexByte(s[j:], '}')
				if end < 0 {
					return nil, fmt.Errorf("unterminated ${")
				}
				j += end + 1
			} else {
				for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
					j++
				}
			}
			cur.WriteString(os.ExpandEnv(s[i:j]))
			i = j - 1
			inWord = true
		case strings.IndexByte("|&;<>()`*?[\\", c) >= 0:
			return nil, fmt.Errorf("unsupported shell syntax %q", string(c))
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words, nil
}
