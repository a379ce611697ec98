package crictl

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	yamlv3 "sigs.k8s.io/yaml/goyaml.v3"
)

// settings is the content of a crictl config file (/etc/crictl.yaml), upstream's format: a flat YAML map
// with the keys runtime-endpoint, image-endpoint, timeout (seconds), debug, pull-image-on-create,
// disable-pull-on-run, max-retries.
type settings struct {
	RuntimeEndpoint   string
	ImageEndpoint     string
	Timeout           time.Duration
	Debug             bool
	PullImageOnCreate bool
	DisablePullOnRun  bool
	// MaxRetries is the number of connection retries for an explicitly set endpoint (0 when the file
	// does not say, as upstream; negative retries forever).
	MaxRetries int
}

// readSettings parses a crictl config file. A missing file returns an error wrapping os.ErrNotExist;
// unknown keys and ill-typed values are errors naming the file, line and key.
func readSettings(path string) (settings, error) {
	var s settings
	data, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return s, fmt.Errorf("config file %s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 {
		return s, nil
	}
	m := doc.Content[0]
	if m.Kind != yamlv3.MappingNode {
		return s, fmt.Errorf("config file %s:%d: want a map of settings", path, m.Line)
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		bad := func(err error) error {
			return fmt.Errorf("config file %s:%d: %s: %q: %v", path, v.Line, k.Value, v.Value, err)
		}
		var err error
		switch k.Value {
		case "runtime-endpoint":
			s.RuntimeEndpoint = v.Value
		case "image-endpoint":
			s.ImageEndpoint = v.Value
		case "timeout":
			var n int
			if n, err = strconv.Atoi(v.Value); err != nil {
				var d time.Duration
				if d, err = time.ParseDuration(v.Value); err == nil {
					s.Timeout = d
				}
			} else {
				s.Timeout = time.Duration(n) * time.Second
			}
		case "debug":
			s.Debug, err = strconv.ParseBool(v.Value)
		case "pull-image-on-create":
			s.PullImageOnCreate, err = strconv.ParseBool(v.Value)
		case "disable-pull-on-run":
			s.DisablePullOnRun, err = strconv.ParseBool(v.Value)
		case "max-retries":
			s.MaxRetries, err = strconv.Atoi(v.Value)
		default:
			return s, fmt.Errorf("config file %s:%d: unknown option %q (known: runtime-endpoint, image-endpoint, timeout, debug, pull-image-on-create, disable-pull-on-run, max-retries)", path, k.Line, k.Value)
		}
		if err != nil {
			return s, bad(err)
		}
	}
	return s, nil
}
