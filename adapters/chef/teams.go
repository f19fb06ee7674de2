package chef

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/ellipsis"
	chefpayload "github.com/opsfirehose/firehose/payloads/chef"
)

// De-duplication id suffixes of the teams' and rollout messages.
const (
	idTeamFailure = "team_failure"
	idRollout     = "rollout"
	idVersions    = "cookbook_versions"
)

// maxErrorMessage keeps a team's failure message compact: the whole error
// is on chef/<org>/<node>/run/failure.
const maxErrorMessage = 1024

func (b *builder) teamFailure(c *chefpayload.RunConverge, blame *chefpayload.FailedCookbook, team string, now time.Time) (bus.Message, error) {
	t, err := b.topics.TeamFailure(c.OrganizationName, team, c.NodeName)
	if err != nil {
		return bus.Message{}, topicError(err, "")
	}
	p := chefpayload.TeamFailure{
		NodeName: c.NodeName, OrganizationName: c.OrganizationName, PolicyName: c.PolicyName, PolicyGroup: c.PolicyGroup,
		Team: team, Cookbook: blame.Name, CookbookVersion: blame.Version, BlamedBy: blame.BlamedBy,
		Resource: blame.Resource, Recipe: blame.Recipe, RunID: c.RunID,
	}
	if c.Error != nil {
		p.ErrorClass = c.Error.Class
		if m := c.Error.Message; m != nil {
			cut := ellipsis.Cut(*m, maxErrorMessage)
			p.ErrorMessage = &cut
		}
	}
	return bus.NewMessage(Source, c.RunID+":"+idTeamFailure, t, appendJSON(nil, p), now), nil
}

func (b *builder) rolloutEvent(c *chefpayload.RunConverge, ev rolloutEvent, blame *chefpayload.FailedCookbook, now time.Time) (bus.Message, error) {
	t, err := b.topics.CookbookRollout(c.OrganizationName, ev.cookbook, ev.version, c.Status)
	if err != nil {
		return bus.Message{}, topicError(err, "")
	}
	p := chefpayload.RolloutEvent{
		NodeName: c.NodeName, OrganizationName: c.OrganizationName, Cookbook: ev.cookbook, Version: ev.version,
		PreviousVersion: ev.previous, PolicyName: c.PolicyName, PolicyGroup: c.PolicyGroup, Status: c.Status,
		Failing: blame != nil && blame.Name == ev.cookbook, Owner: optOwner(b.owners.owner(ev.cookbook)), RunID: c.RunID,
	}
	return bus.NewMessage(Source, c.RunID+":"+idRollout+":"+ev.cookbook, t, appendJSON(nil, p), now), nil
}

// tally builds a tally's retained message; a tally with no version left is
// published with an empty versions object, so that a late subscriber sees
// the cookbook gone.
func (b *builder) tally(snap tallySnapshot, now time.Time) (bus.Message, error) {
	t, err := b.topics.CookbookVersions(snap.key.org, snap.key.cookbook)
	if err != nil {
		return bus.Message{}, err
	}
	p := chefpayload.CookbookTally{OrganizationName: snap.key.org, Cookbook: snap.key.cookbook,
		Owner: optOwner(b.owners.owner(snap.key.cookbook)), Versions: snap.versions}
	for _, v := range snap.versions {
		p.Nodes += v.Nodes
	}
	payload := appendJSON(nil, p)
	// Each publication is a message of its own (a tally can return to an
	// earlier state), so the id has the time besides the content.
	sum := sha256.Sum256(payload)
	id := "sha256-" + hex.EncodeToString(sum[:16]) + ":" + strconv.FormatInt(now.UnixNano(), 10) + ":" + idVersions
	m := bus.NewMessage(Source, id, t, payload, now)
	m.Retain = true
	return m, nil
}
