package membership

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// storageInitializing begins the API server's answer (429) to a list or
// watch that its cache of the resource cannot serve yet; the cause of
// its last failure to build it follows ("storage is (re)initializing:
// conversion webhook for … failed: …").
const storageInitializing = "storage is (re)initializing"

// reportingUnreadyStorage returns a copy of rc whose answers "storage is
// (re)initializing" to a GET reach report, with the request's context.
// client-go's reflector retries a watch answered 429 in silence (its
// watch error handler never hears of it), and the API server answers so
// for as long as it cannot build its cache of the resource: a CRD whose
// conversion webhook fails leaves no object of it readable in the
// version mcs-syncer reads, yet the member stayed engaged while nothing
// it exported moved (seen in CI: TestBrokenConversionWebhookIsNotSilent,
// when no status write failed besides). Reported, the answers count as
// the cache's failures do (watchFailed): a streak of a minute fails the
// member, the cause named. Brief ones (an API server starting, a CRD
// updated) make no streak. APF's 429s are left to the reflector.
func reportingUnreadyStorage(rc *rest.Config, report func(context.Context, error)) *rest.Config {
	rc = rest.CopyConfig(rc)
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &unreadyStorage{next: rt, report: report} })
	return rc
}

type unreadyStorage struct {
	next   http.RoundTripper
	report func(context.Context, error)
}

// maxUnreadyBody bounds what is read of a 429's body to find the text: a
// Status is small.
const maxUnreadyBody = 64 << 10

func (u *unreadyStorage) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := u.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests || req.Method != http.MethodGet {
		return resp, err
	}
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, maxUnreadyBody))
	// The client reads the body as it came: what was read, then the rest.
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
	if readErr != nil || !bytes.Contains(body, []byte(storageInitializing)) {
		return resp, nil
	}
	u.report(req.Context(), unreadyError(req, body))
	return resp, nil
}

// unreadyError is the API server's Status as an error, or (a body that is
// no JSON Status: a protobuf one) the fact that it cannot serve the path.
func unreadyError(req *http.Request, body []byte) error {
	var status metav1.Status
	if json.Unmarshal(body, &status) == nil && status.Code == http.StatusTooManyRequests {
		return &apierrors.StatusError{ErrStatus: status}
	}
	return errors.New("the API server answers " + req.URL.Path + " with 429 " + storageInitializing)
}
