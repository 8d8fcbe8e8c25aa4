package controlplane

// WaitCreated lets the tests of package controlplane_test, which start a
// testbed (package testbed imports this one), wait as Create does.
var WaitCreated = (*ControlPlane).waitCreated
