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

// Table renders objects as the rows `kubectl get` prints: NAME, the resource's Columns, then AGE.
type Table struct {
	Columns []metav1.TableColumnDefinition
	// Cells returns one value per column for obj.
	Cells func(obj runtime.Object) []any
}

// ConvertToTable implements rest.TableConvertor for an object or a list.
func (t Table) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{ColumnDefinitions: append(append([]metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "the object's name"}}, t.Columns...),
		metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: "time since creation"})}
	add := func(o runtime.Object) error {
		m, err := meta.Accessor(o)
		if err != nil {
			return err
		}
		cells := append([]any{m.GetName()}, t.Cells(o)...)
		cells = append(cells, age(m.GetCreationTimestamp()))
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

func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

// Column is a shorthand for a string column definition.
func Column(name, desc string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "string", Description: desc}
}

// Ratio formats "a/b" (READY columns).
func Ratio(a, b int) string { return fmt.Sprintf("%d/%d", a, b) }
