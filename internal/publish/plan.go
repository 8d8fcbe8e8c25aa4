package publish

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// prepare plans the publication of mine over its existing parts (plan),
// and says why it is refused, if it is, from what it would write alone:
// the head and the parts written, never the parts left as they are (a
// change of one endpoint is checked as one part, whatever the export's
// size).
func (p *Publisher) prepare(mine *clusterset.ExportedService, parts []*v1alpha1.PublishedExport) (want *v1alpha1.PublishedExport, plan partPlan, inParts bool, refused string, ok bool) {
	want, plan, inParts, whyWhole, ok := p.plan(mine, parts)
	if !ok {
		return nil, partPlan{}, false, "", false
	}
	if err := checkWrites(want, plan); err != nil {
		// The readers check what they read as this does: an export they
		// would refuse is never Ready=True here (a Service name that the
		// readers' rules once refused was).
		return want, plan, inParts, "the other members would refuse its publication: " + err.Error(), true
	}
	return want, plan, inParts, oversized(mine, want, plan, whyWhole), true
}

// plan returns the head to publish of mine and what makes its parts
// (existing) hold its endpoints: in parts (inParts), or whole, when it
// fits in one part (wholeFits) or while a reader reads only that
// (whyWhole then says so, for a refusal's message). ok is false while
// the readers are not settled: a publisher that has not heard every
// member yet would take an older reader for a newer one.
func (p *Publisher) plan(mine *clusterset.ExportedService, existing []*v1alpha1.PublishedExport) (head *v1alpha1.PublishedExport, plan partPlan, inParts bool, whyWhole string, ok bool) {
	var wholeOnly []clusterset.ClusterID
	if p.opts.Readers != nil {
		var settled bool
		if wholeOnly, settled = p.opts.Readers(); !settled {
			return nil, partPlan{}, false, "", false
		}
	}
	if len(wholeOnly) > 0 {
		slices.Sort(wholeOnly)
		whyWhole = fmt.Sprintf(" (published whole, not in parts, while %s reads whole publications only: upgrade its mcs-syncer)", strings.Join(idStrings(wholeOnly), ", "))
	}
	if whyWhole != "" || wholeFits(mine.EndpointCount(), len(existing), p.maxPerPart()) {
		p.memos.forget(mine.Key)
		whole := *mine
		whole.Endpoints = reconciler.JoinRuns(mine.Endpoints) // one group per key, as every reader's version reads it
		return Encode(&whole, p.opts.Namespace), partPlan{remove: existing}, false, whyWhole, true
	}
	trigger := formatTriggerTime(mine.LastChangeTriggerTime)
	if m := p.memos.of(mine.Key, mine.Endpoints); m != nil {
		plan = m.plan(p.opts.Cluster, mine.Key, p.opts.Namespace, trigger, mine.Endpoints, existing, p.maxPerPart())
	} else {
		plan = planParts(p.opts.Cluster, mine.Key, p.opts.Namespace, trigger, mine.Endpoints, existing, p.maxPerPart())
	}
	head = EncodeHead(mine, p.opts.Namespace)
	head.Spec.Parts = plan.ids
	return head, plan, true, "", true
}

func idStrings(ids []clusterset.ClusterID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(id)
	}
	return out
}

// maxPerPart is opts.MaxEndpointsPerPart, or its default.
func (p *Publisher) maxPerPart() int {
	if p.opts.MaxEndpointsPerPart <= 0 {
		return DefaultMaxEndpointsPerPart
	}
	return p.opts.MaxEndpointsPerPart
}

// checkWrites checks the head and the parts that plan writes as readers
// will (Decode, DecodePart).
func checkWrites(head *v1alpha1.PublishedExport, plan partPlan) error {
	if _, err := Decode(head); err != nil {
		return err
	}
	for _, part := range append(slices.Clip(plan.create), plan.update...) {
		if _, err := DecodePart(part); err != nil {
			return fmt.Errorf("part %s: %w", part.Spec.Part, err)
		}
	}
	return nil
}

// oversized says why a publication cannot be written ("" when every
// object it writes fits): what was published before, if anything, stays,
// so the others keep the endpoints they had, and the condition says why
// no more.
func oversized(mine *clusterset.ExportedService, want *v1alpha1.PublishedExport, plan partPlan, whyWhole string) string {
	for _, o := range append(append([]*v1alpha1.PublishedExport{want}, plan.create...), plan.update...) {
		if size := encodedSize(o); size > MaxPublicationBytes {
			return fmt.Sprintf("its publication's object %s would take %d bytes (%d endpoints in the export), over the %d bytes that one object may take%s; "+
				"the other members keep what was published before, if anything", o.Name, size, mine.EndpointCount(), MaxPublicationBytes, whyWhole)
		}
	}
	return ""
}

// encodedSize is the size of a publication as JSON, as the API server
// stores it. A head's part IDs (500 at 50,000 endpoints) are counted, not
// encoded: they are DNS labels, which JSON takes as they are (encoding
// them was a fifth of the publisher's work for one endpoint's change).
func encodedSize(p *v1alpha1.PublishedExport) int {
	if len(p.Spec.Parts) > 0 && !slices.ContainsFunc(p.Spec.Parts, func(id string) bool { return !isDNSLabel(id) }) {
		withoutIDs := *p
		withoutIDs.Spec.Parts = nil
		// ,"parts":["1","2"]: the key, brackets, and each ID quoted, after
		// a comma but the first.
		size := len(`,"parts":[]`) + len(p.Spec.Parts) - 1
		for _, id := range p.Spec.Parts {
			size += len(id) + 2
		}
		return encodedSize(&withoutIDs) + size
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return 0
	}
	return len(raw)
}
