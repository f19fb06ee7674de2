package chef

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/internal/jsonscan"
	chefpayload "github.com/opsfirehose/firehose/payloads/chef"
)

var automateRepo = flag.String("automate", "",
	"a checkout of chef/automate at the commit of testdata/automate_corpus.tsv: TestAutomateCorpus posts every payload listed there")

// corpusRow is one line of testdata/automate_corpus.tsv.
type corpusRow struct {
	path, sha256, kind, accepted, why, verdict, summary string
}

func corpusRows(t *testing.T) []corpusRow {
	t.Helper()
	var rows []corpusRow
	for _, f := range readTSV(t, "testdata/automate_corpus.tsv", 7) {
		rows = append(rows, corpusRow{f[0], f[1], f[2], f[3], f[4], f[5], f[6]})
	}
	return rows
}

// TestAutomateCorpus posts every payload of Chef Automate's test data that
// testdata/automate_corpus.tsv lists, as chef-client does, to the adapter
// behind a real HTTP server and broker, and checks it against what Automate
// does: nothing Automate accepts is refused, every accepted message reaches
// a subscriber, and every compliance report gets Automate's verdict and
// counts. It needs the files, so it runs only when given a checkout:
//
//	git clone https://github.com/chef/automate /tmp/automate
//	git -C /tmp/automate checkout 61ca031112bf605c9c2a8975957b505635374e49
//	go test ./adapters/chef -run TestAutomateCorpus -automate /tmp/automate -v
func TestAutomateCorpus(t *testing.T) {
	if *automateRepo == "" {
		t.Skip("needs -automate <a checkout of chef/automate>")
	}
	br := startBridge(t, DefaultConfig())
	sub := br.bus.Subscribe(t, "chef/#")
	type tally struct{ files, accepted, refused, automateAccepts, automateRefuses, warned int }
	byKind := map[string]*tally{}
	var published int
	var refusedWhy []string
	verdicts, matches := 0, 0
	for _, r := range corpusRows(t) {
		body, err := os.ReadFile(filepath.Join(*automateRepo, r.path))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != r.sha256 {
			t.Fatalf("%s differs from the file the table describes: check out the commit it names", r.path)
		}
		k := byKind[r.kind]
		if k == nil {
			k = &tally{}
			byKind[r.kind] = k
		}
		k.files++
		automateAccepts := r.accepted != "no"
		if automateAccepts {
			k.automateAccepts++
		} else {
			k.automateRefuses++
		}
		code, answer := postLikeChef(t, br.srv.URL+Path, body, "corpus")
		if code != http.StatusOK {
			k.refused++
			var e struct{ Error string }
			_ = json.Unmarshal([]byte(answer), &e)
			refusedWhy = append(refusedWhy, fmt.Sprintf("%d %s: %s (Automate: %s)", code, r.path, e.Error, r.why))
			if automateAccepts {
				t.Errorf("%s: Automate accepts it, the bridge answered %d %s", r.path, code, answer)
			}
			continue
		}
		k.accepted++
		var ans accepted
		if err := json.Unmarshal([]byte(answer), &ans); err != nil {
			t.Fatalf("%s: %s", r.path, answer)
		}
		if len(ans.Warnings) > 0 {
			k.warned++
		}
		got := br.bus.Collect(t, sub, "chef/corpus/barrier")
		if len(got) != ans.Messages || len(got) == 0 {
			t.Fatalf("%s: %d messages received, the answer says %d", r.path, len(got), ans.Messages)
		}
		published += len(got)
		if r.verdict == "" {
			continue
		}
		// The report's verdict and counts, as a subscriber receives them.
		verdicts++
		sum, _ := jsonscan.Get([]byte(got[0].Payload), chefpayload.SummaryKey)
		var mine, want map[string]any
		_ = json.Unmarshal(sum, &mine)
		_ = json.Unmarshal([]byte(r.summary), &want)
		delete(mine, "status_message")
		if strings.HasSuffix(got[0].Topic, "/compliance/"+r.verdict) && reflect.DeepEqual(mine, want) {
			matches++
		} else {
			t.Errorf("%s: on %s with %s; Automate: %s %s", r.path, got[0].Topic, sum, r.verdict, r.summary)
		}
	}

	var total tally
	kinds := make([]string, 0, len(byKind))
	for kind := range byKind {
		kinds = append(kinds, kind)
	}
	slices.Sort(kinds)
	t.Logf("%-14s %5s %8s %7s %16s %16s %6s", "Automate kind", "files", "accepted", "refused", "Automate accepts", "Automate refuses", "warned")
	for _, kind := range kinds {
		k := byKind[kind]
		t.Logf("%-14s %5d %8d %7d %16d %16d %6d", kind, k.files, k.accepted, k.refused, k.automateAccepts, k.automateRefuses, k.warned)
		total.files += k.files
		total.accepted += k.accepted
		total.refused += k.refused
		total.automateAccepts += k.automateAccepts
		total.automateRefuses += k.automateRefuses
		total.warned += k.warned
	}
	t.Logf("%-14s %5d %8d %7d %16d %16d %6d", "all", total.files, total.accepted, total.refused, total.automateAccepts, total.automateRefuses, total.warned)
	t.Logf("messages received by a subscriber on chef/#: %d", published)
	t.Logf("compliance verdicts and counts equal to Automate's: %d of %d", matches, verdicts)
	for _, r := range refusedWhy {
		t.Log("refused: " + r)
	}
}
