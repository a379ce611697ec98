package resourcequota

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTable(t *testing.T) {
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "compute"}, Status: corev1.ResourceQuotaStatus{
		Hard: corev1.ResourceList{"pods": resource.MustParse("2"), "requests.cpu": resource.MustParse("1"), "limits.memory": resource.MustParse("1Gi")},
		Used: corev1.ResourceList{"pods": resource.MustParse("1"), "requests.cpu": resource.MustParse("400m"), "limits.memory": resource.MustParse("0")},
	}}
	tab, err := table.ConvertToTable(context.Background(), q, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range tab.ColumnDefinitions {
		names = append(names, c.Name)
	}
	cells := tab.Rows[0].Cells
	if len(names) != 4 || names[0] != "Name" || names[1] != "Age" || names[2] != "Request" || names[3] != "Limit" {
		t.Fatalf("columns %v", names)
	}
	if cells[2] != "pods: 1/2, requests.cpu: 400m/1" || cells[3] != "limits.memory: 0/1Gi" {
		t.Errorf("cells %q", cells)
	}
}
