package crictl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	"github.com/spf13/cobra"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// jsonschemaCommand is the `jsonschema` (alias js) subcommand of create, run, runp and pull: it prints
// the JSON schema of the config files they read, derived from the CRI types compiled into this binary.
// withContainer adds --pod/-p and --container/-c to choose (create and run read both files); without
// it the pod config's schema is printed.
func (a *app) jsonschemaCommand(withContainer bool) *cobra.Command {
	var pod, container bool
	cmd := &cobra.Command{
		Use:     "jsonschema",
		Aliases: []string{"js"},
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !withContainer {
				pod = true
			}
			if !pod && !container {
				return errors.New("jsonschema: give --pod, --container or both")
			}
			if pod {
				if err := printJSONSchema(a.out, &runtimeapi.PodSandboxConfig{}); err != nil {
					return err
				}
			}
			if container {
				return printJSONSchema(a.out, &runtimeapi.ContainerConfig{})
			}
			return nil
		},
	}
	if withContainer {
		cmd.Short = "Display the JSON schema for the pod or container config"
		cmd.Flags().BoolVarP(&pod, "pod", "p", false, "print the schema of the pod config (CRI PodSandboxConfig)")
		cmd.Flags().BoolVarP(&container, "container", "c", false, "print the schema of the container config (CRI ContainerConfig)")
	} else {
		cmd.Short = "Display the JSON schema for the pod config"
	}
	return cmd
}

// printJSONSchema writes the JSON schema (draft 2020-12) of the config file that decodes into v, as
// indented JSON: field names as decodeConfigFile accepts them (the CRI protobuf's snake_case), no
// unknown fields, enums as their integers.
func printJSONSchema(out io.Writer, v any) error {
	defs := map[string]any{}
	t := reflect.TypeOf(v).Elem()
	root := map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"$ref":    schemaOf(t, defs)["$ref"],
		"$defs":   defs,
	}
	b, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the JSON schema of %s: %w", t.Name(), err)
	}
	_, err = fmt.Fprintln(out, string(b))
	return err
}

// schemaOf returns the schema of values of type t; named structs go to defs and are referenced.
func schemaOf(t reflect.Type, defs map[string]any) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if _, ok := defs[t.Name()]; !ok {
			defs[t.Name()] = nil // placeholder: a recursive type refers to itself
			props := map[string]any{}
			for name, ft := range jsonFields(t) {
				props[name] = schemaOf(ft, defs)
			}
			defs[t.Name()] = map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		}
		return map[string]any{"$ref": "#/$defs/" + t.Name()}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem(), defs)}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return map[string]any{"type": "array", "items": schemaOf(t.Elem(), defs)}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		s := map[string]any{"type": "integer"}
		if names := enumNames(t); names != nil {
			vals := make([]int, len(names))
			for i := range names {
				vals[i] = i
			}
			s["enum"] = vals
			s["description"] = t.Name() + enumHint(t)
		}
		return s
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "minimum": 0}
	}
	return map[string]any{}
}
