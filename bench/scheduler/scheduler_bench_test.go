// Package scheduler benchmarks nodekit's bundled scheduler against the real API server on embedded
// etcd: 1000 pending pods over 100 Node objects (no kubelets), timed from the scheduler's start to the
// last binding seen by a watch. Run with
//
//	go test -run '^$' -bench . -benchtime=1x ./bench/scheduler/
//
// It prints pods/s; the figure includes the pods/binding round trips through the API server and etcd.
package scheduler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodekit/nodekit/controlplane/scheduler"
	"github.com/nodekit/nodekit/test/framework/apiserver"
)

const (
	numNodes = 100
	numPods  = 1000
)

func BenchmarkSchedulingThroughput(b *testing.B) {
	s := apiserver.Start(b, apiserver.Options{})
	ctx := context.Background()
	client := s.Client
	for i := range numNodes {
		n := &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-node-%03d", i), Labels: map[string]string{"zone": "z" + strconv.Itoa(i%3)}},
			Status: v1.NodeStatus{
				Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("32"), v1.ResourceMemory: resource.MustParse("128Gi"),
					v1.ResourcePods: resource.MustParse("110")},
				Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now()}},
			},
		}
		created, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		created.Status = n.Status
		if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for iter := range b.N {
		b.StopTimer()
		ns := "bench-" + strconv.Itoa(iter)
		if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		createPods(b, client.CoreV1().Pods(ns))
		w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		schedCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		b.StartTimer()
		start := time.Now()
		go func() {
			defer close(done)
			_ = scheduler.Run(schedCtx, client, scheduler.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		}()
		bound := map[string]bool{}
		timeout := time.After(5 * time.Minute)
		for len(bound) < numPods {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					b.Fatal("watch closed")
				}
				if p, isPod := ev.Object.(*v1.Pod); isPod && ev.Type == watch.Modified && p.Spec.NodeName != "" {
					bound[p.Name] = true
				}
			case <-timeout:
				b.Fatalf("only %d of %d pods bound after 5 minutes", len(bound), numPods)
			}
		}
		elapsed := time.Since(start)
		b.StopTimer()
		w.Stop()
		stop()
		<-done
		rate := float64(numPods) / elapsed.Seconds()
		b.ReportMetric(rate, "pods/s")
		fmt.Printf("scheduler throughput: %d pods over %d nodes bound in %v: %.0f pods/s\n", numPods, numNodes, elapsed.Round(time.Millisecond), rate)
		checkSpread(b, client.CoreV1().Pods(ns))
		b.StartTimer()
	}
}

type podClient interface {
	Create(ctx context.Context, pod *v1.Pod, opts metav1.CreateOptions) (*v1.Pod, error)
	List(ctx context.Context, opts metav1.ListOptions) (*v1.PodList, error)
}

// createPods creates the pending pods with 8 concurrent clients: 100 "ReplicaSets" of 10 pods, each
// requesting 100m CPU and 128Mi.
func createPods(b *testing.B, pods podClient) {
	var wg sync.WaitGroup
	errs := make(chan error, numPods)
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				ctrl := true
				p := &v1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%04d", i), OwnerReferences: []metav1.OwnerReference{{
						APIVersion: "apps/v1", Kind: "ReplicaSet", Name: fmt.Sprintf("rs-%02d", i/10), UID: types.UID("rs-uid-" + strconv.Itoa(i/10)), Controller: &ctrl}}},
					Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "demo:v1", Resources: v1.ResourceRequirements{
						Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("128Mi")}}}}},
				}
				if _, err := pods.Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range numPods {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// checkSpread fails the benchmark if the placement is not plausible: every pod bound, no node above
// its pod capacity, and load spread (least-allocated scoring on equal nodes).
func checkSpread(b *testing.B, pods podClient) {
	list, err := pods.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	perNode := map[string]int{}
	for _, p := range list.Items {
		if p.Spec.NodeName == "" {
			b.Fatalf("pod %s unbound", p.Name)
		}
		perNode[p.Spec.NodeName]++
	}
	lo, hi := numPods, 0
	for _, n := range perNode {
		lo, hi = min(lo, n), max(hi, n)
	}
	fmt.Printf("placement: %d nodes used, pods per node min %d max %d\n", len(perNode), lo, hi)
	if len(perNode) != numNodes || hi > 110 || hi-lo > 4 {
		b.Fatalf("poor placement: %d nodes used, per-node min %d max %d", len(perNode), lo, hi)
	}
}
