package scheduler

import (
	"container/heap"

	"k8s.io/client-go/util/workqueue"
)

// priorityQueue orders the active queue as upstream's PrioritySort plugin: higher spec.priority first,
// then the pod that entered the queue earlier. It implements workqueue.Queue, whose callers hold the
// work queue's lock (so it needs none of its own); priority reads a pod key's current priority.
type priorityQueue struct {
	items    []queued
	priority func(key string) int32
	seq      uint64
}

type queued struct {
	key      string
	priority int32
	seq      uint64
}

var _ workqueue.Queue[string] = &priorityQueue{}

func newPriorityQueue(priority func(key string) int32) *priorityQueue {
	return &priorityQueue{priority: priority}
}

// Touch keeps an item that is added again at its place (upstream keeps the original timestamp).
func (q *priorityQueue) Touch(string) {}

// Push adds key at its priority.
func (q *priorityQueue) Push(key string) {
	q.seq++
	heap.Push((*queueHeap)(q), queued{key: key, priority: q.priority(key), seq: q.seq})
}

// Len is the number of queued keys.
func (q *priorityQueue) Len() int { return len(q.items) }

// Pop removes and returns the key of the highest priority (the oldest among equals).
func (q *priorityQueue) Pop() string { return heap.Pop((*queueHeap)(q)).(queued).key }

// queueHeap is priorityQueue's container/heap view.
type queueHeap priorityQueue

func (h *queueHeap) Len() int { return len(h.items) }
func (h *queueHeap) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	return a.seq < b.seq
}
func (h *queueHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *queueHeap) Push(x any)    { h.items = append(h.items, x.(queued)) }
func (h *queueHeap) Pop() any {
	n := len(h.items) - 1
	it := h.items[n]
	h.items = h.items[:n]
	return it
}
