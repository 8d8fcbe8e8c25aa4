package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// returnNamespace holds the exports made right after a member's return.
const returnNamespace = "return"

// returnResult is the member-return scenario's outcome.
type returnResult struct {
	// Times are, per outage, from west's API server answering /readyz again
	// to a change made in west at that moment being imported into north.
	Times []time.Duration
	// Detect are, per outage, from the API server's stop to mcs-syncer
	// reporting west disconnected.
	Detect []time.Duration
}

// runReturn takes west's API server down until mcs-syncer sees it gone,
// brings it back, exports a new Service from west at once, and times its
// arrival in north: the member-return time.
func (b *bench) runReturn(ctx context.Context, rounds int) (*returnResult, error) {
	if err := b.ensureNamespace(ctx, returnNamespace); err != nil {
		return nil, err
	}
	west := b.bed.Cluster("west")
	res := &returnResult{}
	for round := range rounds {
		stopped := time.Now()
		if err := west.StopAPIServer(ctx); err != nil {
			return nil, err
		}
		if _, err := waitFor(ctx, "mcs-syncer to see west disconnected", 2*time.Minute, func() (bool, string) {
			v, err := b.syncer.Metric(ctx, `mcs_syncer_member_connected{cluster="west"}`)
			return err == nil && v == 0, errState(err, fmt.Sprintf("member_connected %v", v))
		}); err != nil {
			_ = west.StartAPIServer(context.Background())
			return nil, err
		}
		res.Detect = append(res.Detect, time.Since(stopped))
		// The clock starts when west's API server first answers /readyz:
		// the testbed's StartAPIServer returns only once kwokctl is done
		// waiting for the whole cluster, sometimes long after.
		// A restart that fails ends the wait with its error (the end of
		// the API server's log), not with the wait's deadline.
		started := make(chan error, 1)
		starting, failed := context.WithCancelCause(ctx)
		go func() {
			err := west.StartAPIServer(ctx)
			if err != nil {
				failed(err)
			}
			started <- err
		}()
		_, err := waitFor(starting, "west's API server to answer", 3*time.Minute, func() (bool, string) {
			_, err := b.kube["west"].Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(starting)
			return err == nil, errState(err, "")
		})
		failed(nil)
		if err != nil {
			if cause := context.Cause(starting); cause != nil && ctx.Err() == nil && !errors.Is(cause, context.Canceled) {
				return nil, fmt.Errorf("restart west's API server: %w", cause)
			}
			return nil, err
		}
		back := time.Now()
		b.logf("return %d: west's API server answers", round+1)
		name := fmt.Sprintf("back-%d", round)
		if err := b.createExport(ctx, "west", 1, returnNamespace, name, round, 1); err != nil {
			return nil, err
		}
		if _, err := waitFor(ctx, "west's new export to reach north", 2*time.Minute, func() (bool, string) {
			list, err := b.kube["north"].DiscoveryV1().EndpointSlices(returnNamespace).List(ctx, metav1.ListOptions{
				LabelSelector: mcsv1beta1.LabelServiceName + "=" + name + "," + mcsv1beta1.LabelSourceCluster + "=west"})
			if err != nil {
				return false, err.Error()
			}
			return slices.ContainsFunc(list.Items, func(s discoveryv1.EndpointSlice) bool { return len(s.Endpoints) > 0 }), fmt.Sprintf("%d slices", len(list.Items))
		}); err != nil {
			return nil, err
		}
		res.Times = append(res.Times, time.Since(back))
		if err := <-started; err != nil {
			return nil, err
		}
		b.logf("return %d: west seen gone after %s, its change imported %s after its return",
			round+1, res.Detect[round].Round(time.Millisecond), res.Times[round].Round(time.Millisecond))
	}
	return res, nil
}
