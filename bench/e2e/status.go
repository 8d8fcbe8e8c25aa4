package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/status"
	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/controlplane"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
)

// statusRuns is how many times the status figure is taken.
const statusRuns = 3

// statusFigure is `kubectl mcs status` over a hub load.
type statusFigure struct {
	// Runs are the wall times of each run of the command; Floor those of
	// the same reads by one client in this process, without the command:
	// the hub's publications, each importer's ServiceExports,
	// ServiceImports and EndpointSlices, and each mcs-syncer's /members.
	Runs, Floor []time.Duration
	// Members and Exit are the last run's report's members and exit code;
	// Problem is its first problem.
	Members, Exit int
	Problem       string
}

// timeStatus times kubectl mcs status as an operator runs it over the hub
// load: every importer read directly, the simulated members through the
// hub (with the first importer's hub identity), each importer's
// mcs-syncer by --syncer; interleaved with the floor's reads.
func (g *growth) timeStatus(ctx context.Context, importers []*testbed.Cluster, sims int) (*statusFigure, error) {
	root, err := host.RepoRoot()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(g.f.stateDir, "kubectl-mcs")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/kubectl-mcs")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build kubectl-mcs: %w\n%s", err, out)
	}
	hubKubeconfig := filepath.Join(g.bed.StateDir, "hub", importers[0].Name+".kubeconfig")
	conf := testbed.ClustersetConfig{Clusterset: "hubload", Hub: &testbed.HubSettings{Kubeconfig: hubKubeconfig}}
	for s := range sims {
		conf.Members = append(conf.Members, testbed.Member{ID: simName(s)})
	}
	args := []string{"status", "-o", "json"}
	var probes []string
	for _, c := range importers {
		conf.Members = append(conf.Members, testbed.Member{ID: c.Name, Kubeconfig: c.KubeconfigPath, Context: c.Context})
		probes = append(probes, g.procs[c.Name].ProbeAddr)
		args = append(args, "--syncer", g.procs[c.Name].ProbeAddr)
	}
	path, err := g.writeConfig("hubload-status", conf)
	if err != nil {
		return nil, err
	}
	args = append(args, "--clusterset-config", path)
	fig := &statusFigure{}
	for range statusRuns {
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		began := time.Now()
		err := cmd.Run()
		fig.Runs = append(fig.Runs, time.Since(began))
		fig.Exit = 0
		if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
			fig.Exit = exit.ExitCode()
		} else if err != nil {
			return nil, err
		}
		var r status.Report
		if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("kubectl mcs status: exit %d, %v\n%s", fig.Exit, err, stderr.String())
		}
		fig.Members, fig.Problem = len(r.Members), ""
		if len(r.Problems) > 0 {
			fig.Problem = fmt.Sprintf("%s (%d in all)", r.Problems[0], len(r.Problems))
		}
		began = time.Now()
		if err := g.statusFloor(ctx, importers, probes); err != nil {
			return nil, err
		}
		fig.Floor = append(fig.Floor, time.Since(began))
	}
	return fig, nil
}

// statusFloor makes the reads that status makes, with the bench's
// clients, one after another.
func (g *growth) statusFloor(ctx context.Context, importers []*testbed.Cluster, probes []string) error {
	var pubs v1alpha1.PublishedExportList
	if err := g.hub.List(ctx, &pubs, client.InNamespace(controlplane.SystemNamespace)); err != nil {
		return err
	}
	for _, c := range importers {
		cl, err := c.Client()
		if err != nil {
			return err
		}
		for _, list := range []client.ObjectList{&mcsv1beta1.ServiceExportList{}, &mcsv1beta1.ServiceImportList{}, &discoveryv1.EndpointSliceList{}} {
			if err := cl.List(ctx, list, client.InNamespace(hubLoadNamespace)); err != nil {
				return err
			}
		}
	}
	for _, addr := range probes {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/members", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		var v map[string]any
		err = json.NewDecoder(resp.Body).Decode(&v)
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
