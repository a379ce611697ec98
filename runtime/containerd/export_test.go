package containerd

// ChildPIDs exposes childPIDs to the external tests.
var ChildPIDs = childPIDs
