package store

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Table renders objects as the rows `kubectl get` prints (meta.k8s.io/v1 Table): NAME, the resource's
// Columns, AGE, then AfterAge. Columns of Priority 0 are always printed; kubectl prints those of Priority 1
// only with -o wide (see Wide), so a Table always carries every column and the client picks.
type Table struct {
	Columns []metav1.TableColumnDefinition
	// AfterAge are the columns after AGE (kubectl's node VERSION, the -o wide columns).
	AfterAge []metav1.TableColumnDefinition
	// Cells returns one value per column of Columns then AfterAge for obj.
	Cells func(obj runtime.Object) []any
}

// ConvertToTable implements rest.TableConvertor for an object or a list.
func (t Table) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	cols := []metav1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name", Description: "the object's name"}}
	cols = append(cols, t.Columns...)
	cols = append(cols, metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: "time since creation"})
	table := &metav1.Table{ColumnDefinitions: append(cols, t.AfterAge...)}
	add := func(o runtime.Object) error {
		m, err := meta.Accessor(o)
		if err != nil {
			return err
		}
		values := t.Cells(o)
		if len(values) != len(t.Columns)+len(t.AfterAge) {
			return fmt.Errorf("table: %d cells for %d columns", len(values), len(t.Columns)+len(t.AfterAge))
		}
		cells := make([]any, 0, len(table.ColumnDefinitions))
		cells = append(cells, m.GetName())
		cells = append(cells, values[:len(t.Columns)]...)
		cells = append(cells, Since(m.GetCreationTimestamp()))
		cells = append(cells, values[len(t.Columns):]...)
		table.Rows = append(table.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: o}})
		return nil
	}
	if meta.IsListType(obj) {
		if err := meta.EachListItem(obj, add); err != nil {
			return nil, err
		}
		if l, err := meta.ListAccessor(obj); err == nil {
			table.ResourceVersion = l.GetResourceVersion()
			table.Continue = l.GetContinue()
			table.RemainingItemCount = l.GetRemainingItemCount()
		}
	} else {
		if err := add(obj); err != nil {
			return nil, err
		}
		if m, err := meta.Accessor(obj); err == nil {
			table.ResourceVersion = m.GetResourceVersion()
		}
	}
	return table, nil
}

// Since is kubectl's age cell: the human duration since t ("5m", "2d3h"), "<unknown>" for a zero time.
func Since(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

// Column is a shorthand for a string column definition.
func Column(name, desc string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "string", Description: desc}
}

// Wide is a string column kubectl prints only with -o wide (Priority 1).
func Wide(name, desc string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "string", Description: desc, Priority: 1}
}

// OrNone is s, or kubectl's "<none>" for an empty s.
func OrNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// Ratio formats "a/b" (READY columns).
func Ratio(a, b int) string { return fmt.Sprintf("%d/%d", a, b) }
