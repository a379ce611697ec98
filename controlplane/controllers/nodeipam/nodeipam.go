// Package nodeipam is the node IPAM controller (upstream's RangeAllocator): each Node gets a podCIDR,
// a /24 (configurable) of the cluster CIDR that no other Node has, in spec.podCIDR and spec.podCIDRs;
// a deleted Node's podCIDR is freed. On start it reads every existing Node's podCIDR first, so a
// restarted controller never hands out a subnet twice.
package nodeipam

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
)

// Controller assigns podCIDRs. Queue keys are Node names.
type Controller struct {
	client kubernetes.Interface
	nodes  corelisters.NodeLister
	synced cache.InformerSynced
	alloc  *Allocator
	*workloop.Loop
}

// New registers the controller on factory's Node informer; clusterCIDR and maskSize configure the
// allocator (see NewAllocator).
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, clusterCIDR string, maskSize int, log *slog.Logger) (*Controller, error) {
	alloc, err := NewAllocator(clusterCIDR, maskSize)
	if err != nil {
		return nil, err
	}
	inf := factory.Core().V1().Nodes().Informer()
	c := &Controller{client: client, nodes: factory.Core().V1().Nodes().Lister(), synced: inf.HasSynced, alloc: alloc}
	c.Loop = workloop.New("nodeipam", c.reconcile, log)
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onNode,
		UpdateFunc: func(_, obj any) { c.onNode(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if n, ok := obj.(*v1.Node); ok {
				for _, cidr := range n.Spec.PodCIDRs {
					c.alloc.Release(cidr)
				}
				if n.Spec.PodCIDR != "" {
					c.alloc.Release(n.Spec.PodCIDR)
				}
				c.Log().Info("released podCIDR", "node", n.Name, "podCIDR", n.Spec.PodCIDR)
			}
		},
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// onNode records a Node's existing podCIDR as taken and queues Nodes that have none.
func (c *Controller) onNode(obj any) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	if n.Spec.PodCIDR != "" {
		if err := c.alloc.Occupy(n.Spec.PodCIDR); err != nil {
			c.Log().Warn("node has a podCIDR outside the cluster CIDR", "node", n.Name, "err", err)
		}
		return
	}
	c.Add(n.Name)
}

// Run waits until the Node cache is synced (so every existing podCIDR is occupied) before allocating.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	// Occupy again from the synced cache: handlers may still be delivering the initial list.
	nodes, _ := c.nodes.List(labels.Everything())
	for _, n := range nodes {
		if n.Spec.PodCIDR != "" {
			_ = c.alloc.Occupy(n.Spec.PodCIDR)
		}
	}
	c.Loop.Run(ctx, 1) // one worker: allocation and the patch for a node are never interleaved
}

func (c *Controller) reconcile(ctx context.Context, name string) error {
	n, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if n.Spec.PodCIDR != "" || n.DeletionTimestamp != nil {
		return nil
	}
	// The cache may lag our own last patch: ask the API server before allocating.
	live, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if live.Spec.PodCIDR != "" {
		return c.alloc.Occupy(live.Spec.PodCIDR)
	}
	cidr, err := c.alloc.Allocate()
	if err != nil {
		return fmt.Errorf("allocate podCIDR for node %s: %w", name, err)
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"podCIDR": cidr, "podCIDRs": []string{cidr}}})
	if _, err := c.client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		c.alloc.Release(cidr)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("set podCIDR %s on node %s: %w", cidr, name, err)
	}
	c.Log().Info("assigned podCIDR", "node", name, "podCIDR", cidr)
	return nil
}
