package store

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestTableLayout: NAME, Columns, AGE, AfterAge, in that order for definitions and cells, for an object
// and for a list (whose resourceVersion the table carries); a Cells of the wrong length is an error.
func TestTableLayout(t *testing.T) {
	tbl := Table{
		Columns:  []metav1.TableColumnDefinition{Column("Data", "keys")},
		AfterAge: []metav1.TableColumnDefinition{Column("Version", "v"), Wide("Extra", "x")},
		Cells: func(o runtime.Object) []any {
			return []any{len(o.(*corev1.ConfigMap).Data), "v1", OrNone("")}
		},
	}
	cm := corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", CreationTimestamp: metav1.NewTime(time.Now().Add(-90 * time.Minute))},
		Data: map[string]string{"a": "1", "b": "2"}}
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "42"}, Items: []corev1.ConfigMap{cm, {ObjectMeta: metav1.ObjectMeta{Name: "new"}}}}
	got, err := tbl.ConvertToTable(context.Background(), list, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got.ColumnDefinitions {
		names = append(names, c.Name)
	}
	if strings.Join(names, " ") != "Name Data Age Version Extra" {
		t.Fatalf("columns = %v", names)
	}
	if got.ColumnDefinitions[4].Priority != 1 || got.ColumnDefinitions[3].Priority != 0 {
		t.Fatalf("priorities: %+v", got.ColumnDefinitions)
	}
	if got.ResourceVersion != "42" || len(got.Rows) != 2 {
		t.Fatalf("table rv=%q rows=%d", got.ResourceVersion, len(got.Rows))
	}
	want := []any{"cfg", 2, "90m", "v1", "<none>"}
	for i, c := range got.Rows[0].Cells {
		if c != want[i] {
			t.Fatalf("row 0 = %v, want %v", got.Rows[0].Cells, want)
		}
	}
	if age := got.Rows[1].Cells[2]; age != "<unknown>" {
		t.Fatalf("age of a zero creation time = %v", age)
	}
	tbl.Cells = func(runtime.Object) []any { return []any{1} }
	if _, err := tbl.ConvertToTable(context.Background(), &cm, nil); err == nil || !strings.Contains(err.Error(), "1 cells for 3 columns") {
		t.Fatalf("short cells: err = %v", err)
	}
}
