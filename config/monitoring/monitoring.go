// Package monitoring holds mcs-syncer's alerting rules and Grafana
// dashboard (the files beside this one) for the tests that check them: the
// rules by promtool and a real Prometheus, the dashboard's queries against
// the metrics mcs-syncer registers and by a real Prometheus.
package monitoring

import (
	_ "embed"
	"encoding/json"
)

// Rules is rules.yaml, a Prometheus rule file.
//
//go:embed rules.yaml
var Rules []byte

//go:embed dashboard.json
var dashboard []byte

// Query is one query of the dashboard, with the title of its panel.
type Query struct {
	Panel string
	Expr  string
}

// DashboardQueries returns every query of dashboard.json, panel by panel,
// and how many panels have none (or no title).
func DashboardQueries() (queries []Query, untitledOrEmpty int, err error) {
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dashboard, &dash); err != nil {
		return nil, 0, err
	}
	for _, p := range dash.Panels {
		if p.Title == "" || len(p.Targets) == 0 {
			untitledOrEmpty++
		}
		for _, t := range p.Targets {
			queries = append(queries, Query{Panel: p.Title, Expr: t.Expr})
		}
	}
	return queries, untitledOrEmpty, nil
}
