// Package storetest renders a resource's kubectl table in unit tests.
package storetest

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Row converts obj with conv and returns the column names kubectl prints by default and those it adds
// with -o wide (Priority > 0), each joined by "|", and the cells of obj's row. It fails the test on an
// error or when the table has not exactly one row.
func Row(t testing.TB, conv rest.TableConvertor, obj runtime.Object) (columns, wide string, cells []any) {
	t.Helper()
	tbl, err := conv.ConvertToTable(context.Background(), obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tbl.Rows) != 1 {
		t.Fatalf("table of one object has %d rows", len(tbl.Rows))
	}
	var def, extra []string
	for _, c := range tbl.ColumnDefinitions {
		if c.Priority > 0 {
			extra = append(extra, c.Name)
		} else {
			def = append(def, c.Name)
		}
	}
	return strings.Join(def, "|"), strings.Join(extra, "|"), tbl.Rows[0].Cells
}
