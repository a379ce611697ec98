package crictl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/google/uuid"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"
	yamlv3 "sigs.k8s.io/yaml/goyaml.v3"
)

// loadPodSandboxConfig reads a CRI PodSandboxConfig from a JSON or YAML file (the format of upstream
// crictl runp: snake_case keys as in the CRI protobuf, enums as integers). It rejects unknown fields and
// wrongly typed values with "FILE:LINE:COL: field PATH: reason". metadata.name and metadata.namespace are
// required; an empty metadata.uid is filled with a random UUID, as upstream does.
func loadPodSandboxConfig(path string) (*runtimeapi.PodSandboxConfig, error) {
	var cfg runtimeapi.PodSandboxConfig
	if err := decodeConfigFile(path, &cfg); err != nil {
		return nil, err
	}
	md := cfg.GetMetadata()
	switch {
	case md == nil:
		return nil, fmt.Errorf("%s: field metadata: required (name, namespace, uid, attempt)", path)
	case md.GetName() == "":
		return nil, fmt.Errorf("%s: field metadata.name: required", path)
	case md.GetNamespace() == "":
		return nil, fmt.Errorf("%s: field metadata.namespace: required", path)
	}
	if md.Uid == "" {
		md.Uid = uuid.NewString()
	}
	return &cfg, nil
}

// loadContainerConfig reads a CRI ContainerConfig from a JSON or YAML file, with the same strictness as
// loadPodSandboxConfig. metadata.name and image.image are required; image.user_specified_image defaults
// to image.image.
func loadContainerConfig(path string) (*runtimeapi.ContainerConfig, error) {
	var cfg runtimeapi.ContainerConfig
	if err := decodeConfigFile(path, &cfg); err != nil {
		return nil, err
	}
	switch {
	case cfg.GetMetadata() == nil:
		return nil, fmt.Errorf("%s: field metadata: required (name, attempt)", path)
	case cfg.GetMetadata().GetName() == "":
		return nil, fmt.Errorf("%s: field metadata.name: required", path)
	case cfg.GetImage() == nil || cfg.GetImage().GetImage() == "":
		return nil, fmt.Errorf("%s: field image.image: required", path)
	}
	if cfg.Image.UserSpecifiedImage == "" {
		cfg.Image.UserSpecifiedImage = cfg.Image.Image
	}
	return &cfg, nil
}

// decodeConfigFile strictly decodes a JSON or YAML file into the CRI message out. The document is first
// walked against out's Go type so that the first unknown field or ill-typed value is reported with the
// file, line and column where it appears and its dotted field path; only then is it decoded.
func decodeConfigFile(path string, out any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("config file %s not found", path)
		}
		return fmt.Errorf("read config file: %w", err)
	}
	if err := checkJSONSyntax(data); err != nil {
		return fmt.Errorf("%s:%w", path, err)
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 {
		return fmt.Errorf("%s: file is empty", path)
	}
	if err := checkNode(doc.Content[0], reflect.TypeOf(out), ""); err != nil {
		var fe *fieldError
		if errors.As(err, &fe) {
			return fmt.Errorf("%s:%d:%d: %s", path, fe.line, fe.col, fe.msg)
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := yaml.UnmarshalStrict(data, out); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// checkJSONSyntax reports a JSON document's syntax error as "LINE:COL: reason" (YAML parsers place
// JSON errors at the start of the enclosing object instead). Non-JSON documents pass.
func checkJSONSyntax(data []byte) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') {
		return nil
	}
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return nil
	}
	// Offset counts the offending byte; at the end of the input, point just past it.
	end := int(se.Offset) - 1
	if int(se.Offset) >= len(data) {
		end = len(data)
	}
	line, col := 1, 1
	for _, b := range data[:max(end, 0)] {
		if b == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Errorf("%d:%d: invalid JSON: %s", line, col, strings.TrimPrefix(se.Error(), "json: "))
}

// fieldError locates a problem in a config document.
type fieldError struct {
	line, col int
	msg       string
}

func (e *fieldError) Error() string { return fmt.Sprintf("%d:%d: %s", e.line, e.col, e.msg) }

func errAt(n *yamlv3.Node, path, format string, args ...any) error {
	if path == "" {
		path = "(document)"
	}
	return &fieldError{line: n.Line, col: n.Column, msg: "field " + path + ": " + fmt.Sprintf(format, args...)}
}

// jsonFields maps the JSON names of a struct's exported fields (as encoding/json, and so
// sigs.k8s.io/yaml, sees them) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// checkNode verifies that the YAML node n can decode into a value of type t, recursing into mappings
// and sequences. It mirrors what encoding/json accepts after sigs.k8s.io/yaml's YAML→JSON conversion.
func checkNode(n *yamlv3.Node, t reflect.Type, path string) error {
	for n.Kind == yamlv3.AliasNode {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yamlv3.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yamlv3.MappingNode {
			return errAt(n, path, "want an object, got %s", describe(n))
		}
		fields := jsonFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ft, ok := fields[k.Value]
			if !ok {
				known := make([]string, 0, len(fields))
				for name := range fields {
					known = append(known, name)
				}
				sort.Strings(known)
				return errAt(k, joinPath(path, k.Value), "unknown field (known fields here: %s)", strings.Join(known, ", "))
			}
			if err := checkNode(v, ft, joinPath(path, k.Value)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yamlv3.MappingNode {
			return errAt(n, path, "want an object of %s values, got %s", t.Elem().Kind(), describe(n))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if err := checkNode(v, t.Elem(), joinPath(path, k.Value)); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 { // bytes: a base64 string in JSON
			if n.Kind != yamlv3.ScalarNode {
				return errAt(n, path, "want a base64 string, got %s", describe(n))
			}
			return nil
		}
		if n.Kind != yamlv3.SequenceNode {
			return errAt(n, path, "want a list, got %s", describe(n))
		}
		for i, c := range n.Content {
			if err := checkNode(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.String:
		// A number or boolean is refused as kubectl refuses it: sigs.k8s.io/yaml would silently turn
		// `"name": 5` into "5" (quote it in YAML to mean the string).
		if n.Kind != yamlv3.ScalarNode || n.Tag == "!!int" || n.Tag == "!!float" || n.Tag == "!!bool" {
			return errAt(n, path, "want a string, got %s", describe(n))
		}
	case reflect.Bool:
		if n.Kind != yamlv3.ScalarNode || n.Tag != "!!bool" {
			return errAt(n, path, "want true or false, got %s", describe(n))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n.Kind != yamlv3.ScalarNode || n.Tag != "!!int" {
			return errAt(n, path, "want an integer%s, got %s", enumHint(t), describe(n))
		}
		if _, err := strconv.ParseInt(n.Value, 0, t.Bits()); err != nil {
			return errAt(n, path, "%s does not fit in a %d-bit integer", n.Value, t.Bits())
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.Kind != yamlv3.ScalarNode || n.Tag != "!!int" {
			return errAt(n, path, "want a non-negative integer, got %s", describe(n))
		}
		if _, err := strconv.ParseUint(n.Value, 0, t.Bits()); err != nil {
			return errAt(n, path, "%s is not a non-negative %d-bit integer", n.Value, t.Bits())
		}
	case reflect.Float32, reflect.Float64:
		if n.Kind != yamlv3.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
			return errAt(n, path, "want a number, got %s", describe(n))
		}
	}
	return nil
}

// enumHint lists the values of a protobuf enum type, e.g. " (0=POD, 1=CONTAINER, 2=NODE, 3=TARGET)".
func enumHint(t reflect.Type) string {
	names := enumNames(t)
	if len(names) == 0 {
		return ""
	}
	hint := make([]string, len(names))
	for i, n := range names {
		hint[i] = fmt.Sprintf("%d=%s", i, n)
	}
	return " (" + strings.Join(hint, ", ") + ")"
}

// enumNames returns the names of a protobuf enum type's values 0, 1, 2, … (nil for another type).
func enumNames(t reflect.Type) []string {
	type enum interface{ String() string }
	if t.PkgPath() == "" || !reflect.PointerTo(t).Implements(reflect.TypeFor[enum]()) {
		return nil
	}
	var names []string
	for i := int64(0); i < 16; i++ {
		v := reflect.New(t).Elem()
		v.SetInt(i)
		s := v.Interface().(enum).String()
		if s == strconv.FormatInt(i, 10) {
			break
		}
		names = append(names, s)
	}
	return names
}

func describe(n *yamlv3.Node) string {
	switch n.Kind {
	case yamlv3.MappingNode:
		return "an object"
	case yamlv3.SequenceNode:
		return "a list"
	}
	switch n.Tag {
	case "!!str":
		return strconv.Quote(n.Value)
	case "!!int", "!!float":
		return "the number " + n.Value
	case "!!bool":
		return n.Value
	}
	return n.Value
}
