package crictl

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	yamlv3 "sigs.k8s.io/yaml/goyaml.v3"
)

// settingKeys are the options of a crictl config file, in the order upstream writes them.
var settingKeys = []string{"runtime-endpoint", "image-endpoint", "timeout", "debug", "pull-image-on-create", "disable-pull-on-run", "max-retries"}

// get returns the value of option key as `crictl config --get` prints it (timeout in whole seconds).
func (s *settings) get(key string) (string, error) {
	switch key {
	case "runtime-endpoint":
		return s.RuntimeEndpoint, nil
	case "image-endpoint":
		return s.ImageEndpoint, nil
	case "timeout":
		if s.Timeout%time.Second != 0 {
			return s.Timeout.String(), nil // nodekit also reads durations such as 1500ms
		}
		return strconv.Itoa(int(s.Timeout / time.Second)), nil
	case "debug":
		return strconv.FormatBool(s.Debug), nil
	case "pull-image-on-create":
		return strconv.FormatBool(s.PullImageOnCreate), nil
	case "disable-pull-on-run":
		return strconv.FormatBool(s.DisablePullOnRun), nil
	case "max-retries":
		return strconv.Itoa(s.MaxRetries), nil
	}
	return "", unknownSetting(key)
}

// set parses value for option key; an ill-typed value is an error naming the key.
func (s *settings) set(key, value string) error {
	var err error
	switch key {
	case "runtime-endpoint":
		s.RuntimeEndpoint = value
	case "image-endpoint":
		s.ImageEndpoint = value
	case "timeout":
		var n int
		if n, err = strconv.Atoi(value); err == nil {
			s.Timeout = time.Duration(n) * time.Second
		}
	case "debug":
		s.Debug, err = strconv.ParseBool(value)
	case "pull-image-on-create":
		s.PullImageOnCreate, err = strconv.ParseBool(value)
	case "disable-pull-on-run":
		s.DisablePullOnRun, err = strconv.ParseBool(value)
	case "max-retries":
		s.MaxRetries, err = strconv.Atoi(value)
	default:
		return unknownSetting(key)
	}
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) {
			err = ne.Err
		}
		return fmt.Errorf("option %s: %q: %v", key, value, err)
	}
	return nil
}

func unknownSetting(key string) error {
	return fmt.Errorf("no configuration option named %q (known: %s)", key, strings.Join(settingKeys, ", "))
}

// writeSettings writes s to the config file at path, creating it (and its directory) when missing:
// every option is written, existing keys keep their place and comments, missing ones are appended in
// upstream's order. The file is written with mode 0600, as upstream writes it.
func writeSettings(path string, s settings) error {
	var doc yamlv3.Node
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	default:
		if err := yamlv3.Unmarshal(data, &doc); err != nil {
			return fmt.Errorf("config file %s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
		}
	}
	if len(doc.Content) == 0 {
		doc = yamlv3.Node{Kind: yamlv3.DocumentNode, Content: []*yamlv3.Node{{Kind: yamlv3.MappingNode, Tag: "!!map"}}}
	}
	m := doc.Content[0]
	for _, key := range settingKeys {
		v, _ := s.get(key)
		style := yamlv3.Style(0)
		if v == "" {
			style = yamlv3.DoubleQuotedStyle // `key: ""`, as upstream writes it, not a null
		}
		found := false
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == key {
				m.Content[i+1].Value, m.Content[i+1].Tag, m.Content[i+1].Style = v, "", style
				found = true
			}
		}
		if !found {
			m.Content = append(m.Content, &yamlv3.Node{Kind: yamlv3.ScalarNode, Value: key}, &yamlv3.Node{Kind: yamlv3.ScalarNode, Value: v, Style: style})
		}
	}
	out, err := yamlv3.Marshal(&doc)
	if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}

// configOptions are the options of config: --get KEY, --set KEY=VALUE[,KEY=VALUE] (repeatable),
// --list, or the positional KEY VALUE form.
type configOptions struct {
	path string
	get  string
	sets []string
	list bool
	args []string
}

// configCommand gets, sets and lists the options of the config file (--config, CRI_CONFIG_FILE or
// /etc/crictl.yaml), creating it when missing, as upstream does. It does not contact the runtime.
func (a *app) configCommand() *cobra.Command {
	var o configOptions
	cmd := &cobra.Command{
		Use:   "config [--get KEY | --set KEY=VALUE[,KEY=VALUE] | --list | KEY VALUE]",
		Short: "Get, set and list crictl configuration options",
		Long: `Get, set and list the options of the crictl config file (--config, CRI_CONFIG_FILE or ` + defaultConfigPath + `).

Examples:
   crictl config --set debug=true
   crictl config debug true
   crictl config --get debug
   crictl config --list

Options of the file:
   runtime-endpoint:      CRI runtime endpoint (default: "")
   image-endpoint:        CRI image endpoint (default: "")
   timeout:               timeout of each CRI call in seconds (default: 2)
   debug:                 enable debug output (default: false)
   pull-image-on-create:  pull the image on create (default: false)
   disable-pull-on-run:   do not pull the image on run (default: false)
   max-retries:           connection retries for an explicitly set endpoint (default: 3 without a file; 0 disables, negative retries forever)`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.path, o.args = a.configPath, args
			if !cmd.Flags().Changed("get") && len(o.sets) == 0 && !o.list && len(args) == 0 {
				return cmd.Help()
			}
			return o.run(a.out)
		},
	}
	cmd.Flags().StringVar(&o.get, "get", "", "show the value of option KEY")
	cmd.Flags().StringArrayVar(&o.sets, "set", nil, "set options KEY=VALUE (repeatable, or comma-separated: k1=v1,k2=v2)")
	cmd.Flags().BoolVar(&o.list, "list", false, "show all options and their values")
	return cmd
}

// run carries out the one action o asks for against the file at o.path.
func (o *configOptions) run(out io.Writer) error {
	s, err := readSettings(o.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	switch {
	case o.get != "":
		v, err := s.get(o.get)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, v)
		return err
	case len(o.sets) > 0:
		for _, set := range o.sets {
			for _, opt := range strings.Split(set, ",") {
				key, value, ok := strings.Cut(opt, "=")
				if !ok || strings.Contains(value, "=") {
					return fmt.Errorf("--set %q: want KEY=VALUE[,KEY=VALUE]", set)
				}
				if err := s.set(key, value); err != nil {
					return err
				}
			}
		}
	case o.list:
		t := newTable(out)
		t.row("KEY", "VALUE")
		for _, key := range settingKeys {
			v, _ := s.get(key)
			t.row(key, v)
		}
		return t.flush()
	default:
		if len(o.args) != 2 {
			return fmt.Errorf("config %s: want KEY VALUE (or --get, --set, --list)", strings.Join(o.args, " "))
		}
		if err := s.set(o.args[0], o.args[1]); err != nil {
			return err
		}
	}
	return writeSettings(o.path, s)
}
