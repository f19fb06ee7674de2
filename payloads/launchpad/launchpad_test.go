package launchpad

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"mime/quotedprintable"
	"reflect"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/payloads"
)

// bugHeaders are the headers of a Launchpad bug notification, folded as
// Launchpad folds them.
const bugHeaders = `Return-Path: <bounces@canonical.com>
MIME-Version: 1.0
Content-Type: text/plain; charset="utf-8"
Content-Transfer-Encoding: quoted-printable
Date: Fri, 07 Apr 2017 18:33:12 -0000
From: Jane Dev <1680938@bugs.launchpad.net>
To: firehose@example.org
Reply-To: Bug 1680938 <1680938@bugs.launchpad.net>
Sender: bounces@canonical.com
X-Launchpad-Notification-Type: bug
X-Launchpad-Bug: product=octavia; status=Triaged; importance=Medium;
 assignee=email@fakedomain.com; 
X-Launchpad-Bug: distribution=ubuntu; sourcepackage=octavia; component=main;
 status=New; importance=Undecided; assignee=None; 
X-Launchpad-Bug-Tags: rfe  lbaas
X-Launchpad-Bug-Information-Type: Public
X-Launchpad-Bug-Private: no
X-Launchpad-Bug-Security-Vulnerability: no
X-Launchpad-Bug-Commenters: jdev rroe
X-Launchpad-Bug-Reporter: =?utf-8?q?Ren=C3=A9_Roe_=28rroe=29?=
X-Launchpad-Bug-Modifier: Jane Dev (jdev)
Message-Id: <149158999228.29327.4398811213829917337.malonedeb@gac.canonical.com>
Subject: =?utf-8?q?=5BBug_1680938=5D_=5BNEW=5D_Octavia_should_support_UDP_?=
 =?utf-8?q?=E2=80=94_listeners?=
X-Launchpad-Message-Rationale: Subscriber (octavia)
X-Launchpad-Message-For: firehose
Precedence: bulk
X-Generated-By: Launchpad (canonical.com);
 Revision="4853cb86c14c5a9e513816c8a61121c639b30835"; Instance="production"
X-Launchpad-Hash: 3c87b3f174f29a10d42bfb658d0cef0adad06a5d
`

const bugText = "Public bug reported:\n\nOctavia should support UDP — so that DNS can be balanced.\n\n** Tags added: rfe\n\n-- \nYou received this bug notification because you are subscribed to octavia.\nhttps://bugs.launchpad.net/bugs/1680938\n"

func qp(s string) string {
	var b strings.Builder
	w := quotedprintable.NewWriter(&b)
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	// The writer ends lines with CRLF, as SMTP does; MTA pipes hand over LF.
	return strings.ReplaceAll(b.String(), "\r\n", "\n")
}

func TestBugNotification(t *testing.T) {
	mail := "From bounces@canonical.com Fri Apr  7 18:33:12 2017\n" + bugHeaders + "\n" + qp(bugText)
	n, err := Parse([]byte(mail))
	if err != nil {
		t.Fatal(err)
	}
	if n.Type != "bug" || n.Project != "octavia" || n.EventType != "bug" || n.BugNumber != "1680938" || len(n.ID) != 32 {
		t.Fatalf("%+v", n)
	}
	var got map[string]any
	if err := json.Unmarshal(n.Payload, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"event-type":   "bug",
		"project":      "octavia",
		"status":       "Triaged",
		"importance":   "Medium",
		"assignee":     "email@fakedomain.com",
		"commenters":   []any{"jdev", "rroe"},
		"tags":         []any{"rfe", "lbaas"},
		"bug-reporter": "René Roe (rroe)",
		"bug-modifier": "Jane Dev (jdev)",
		"bug-number":   "1680938",
		"body":         bugText,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("payload\n got %v\nwant %v", got, want)
	}
}

func TestBodies(t *testing.T) {
	const text = "Comment: déjà vu =) over\nmany lines\n"
	header := strings.Replace(bugHeaders, "Content-Type: text/plain; charset=\"utf-8\"\nContent-Transfer-Encoding: quoted-printable\n", "", 1)
	b64 := base64.StdEncoding.EncodeToString([]byte(text))
	b64 = b64[:20] + "\r\n" + b64[20:]
	latin1 := "Comment: d\xe9j\xe0 vu =) over\nmany lines\n"
	tests := []struct {
		name, headers, body, want string
	}{
		{"7bit", "Content-Type: text/plain; charset=utf-8\n", text, text},
		{"no content type", "", text, text},
		{"quoted-printable", "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: Quoted-Printable\n", qp(text), text},
		{"base64", "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n", b64, text},
		{"latin-1", "Content-Type: text/plain; charset=ISO-8859-1\nContent-Transfer-Encoding: 8bit\n", latin1, text},
		{"multipart", "Content-Type: multipart/mixed; boundary=\"b1\"\n",
			"preamble\n--b1\nContent-Type: text/html\n\n<p>html</p>\n--b1\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\n" + b64 + "\n--b1--\n",
			text},
		{"nested multipart", "Content-Type: multipart/mixed; boundary=outer\n",
			"--outer\nContent-Type: multipart/alternative; boundary=inner\n\n--inner\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: quoted-printable\n\n" + qp(text) + "\n--inner\nContent-Type: text/html\n\n<p/>\n--inner--\n--outer\nContent-Type: text/plain\nContent-Disposition: attachment; filename=log.txt\n\nattached\n--outer--\n",
			text},
		{"html only", "Content-Type: multipart/alternative; boundary=b\n", "--b\nContent-Type: text/html\n\n<p>hi</p>\n--b--\n", "<p>hi</p>"},
		{"attachment only", "Content-Type: multipart/mixed; boundary=b\n", "--b\nContent-Type: application/pdf\n\n%PDF\n--b--\n", ""},
	}
	for _, tt := range tests {
		n, err := Parse([]byte(header + tt.headers + "\n" + tt.body))
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		var p struct{ Body string }
		if err := json.Unmarshal(n.Payload, &p); err != nil || p.Body != tt.want {
			t.Errorf("%s: body %q, want %q (%v)", tt.name, p.Body, tt.want, err)
		}
	}
}

func TestOtherNotifications(t *testing.T) {
	mail := `From: Launchpad <noreply@launchpad.net>
Subject: [Merge] lp:~jdev/octavia/udp into lp:octavia
X-Launchpad-Project: octavia
X-Launchpad-Branch: ~octavia/octavia/trunk
X-Launchpad-Message-Rationale: Reviewer
X-Launchpad-Message-Rationale: Owner
X-Launchpad-Notification-Type: code-review
X-Generated-By: Launchpad (canonical.com); Revision="1"; Instance="production"
Message-Id: <abc@launchpad.net>

Review: Approve
`
	n, err := Parse([]byte(mail))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	_ = json.Unmarshal(n.Payload, &got)
	want := map[string]any{
		"X-Launchpad-Project":           "octavia",
		"X-Launchpad-Branch":            "~octavia/octavia/trunk",
		"X-Launchpad-Message-Rationale": "Reviewer",
		"X-Launchpad-Notification-Type": "code-review",
		"body":                          "Review: Approve\n",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("payload\n got %v\nwant %v", got, want)
	}
	// No X-Launchpad-Bug: the project is unknown, so the topic stops there.
	if n.Project != "" || n.EventType != "code-review" || n.BugNumber != "" {
		t.Errorf("levels %q %q %q", n.Project, n.EventType, n.BugNumber)
	}

	// A bug mail without a notification type keeps its project: the topic is
	// launchpad/octavia.
	noType := strings.Replace(bugHeaders, "X-Launchpad-Notification-Type: bug\n", "", 1) + "\nbody\n"
	n, err = Parse([]byte(noType))
	if err != nil {
		t.Fatal(err)
	}
	if n.Project != "octavia" || n.EventType != "" || n.BugNumber != "1680938" {
		t.Errorf("levels %q %q %q", n.Project, n.EventType, n.BugNumber)
	}
	_ = json.Unmarshal(n.Payload, &got)
	if got["X-Launchpad-Bug"] != "product=octavia; status=Triaged; importance=Medium; assignee=email@fakedomain.com;" ||
		got["X-Launchpad-Bug-Reporter"] != "René Roe (rroe)" || got["event-type"] != nil {
		t.Errorf("payload %v", got)
	}
}

// TestHeaderSpelling checks that the X-Launchpad-* names of a notification
// other than a bug are published as the mail spells them, and that a mail
// with several X-Launchpad-Bug headers takes its project from the product's.
func TestHeaderSpelling(t *testing.T) {
	mail := `X-Generated-By: Launchpad (canonical.com)
X-Launchpad-Notification-Type: package-upload
X-Launchpad-PPA: ~octavia-team/ubuntu/ppa
X-Launchpad-Archive: ppa:octavia-team/ppa
X-LAUNCHPAD-component: component=main,
 section=net
x-launchpad-ppa: second spelling, second value
X-Launchpad-Bug: distribution=ubuntu; sourcepackage=octavia; status=New
X-Launchpad-Bug: product=octavia; status=Triaged
Subject: [PPA octavia-team] [ubuntu/jammy] octavia 1.0-1 (Accepted)

X-Launchpad-Body: not a header
`
	for _, eol := range []string{"\n", "\r\n"} {
		n, err := Parse([]byte(strings.ReplaceAll(mail, "\n", eol)))
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		_ = json.Unmarshal(n.Payload, &got)
		want := map[string]any{
			"X-Launchpad-Notification-Type": "package-upload",
			"X-Launchpad-PPA":               "~octavia-team/ubuntu/ppa",
			"X-Launchpad-Archive":           "ppa:octavia-team/ppa",
			"X-LAUNCHPAD-component":         "component=main, section=net",
			"X-Launchpad-Bug":               "distribution=ubuntu; sourcepackage=octavia; status=New",
			"body":                          "X-Launchpad-Body: not a header\n",
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q line ends: payload\n got %v\nwant %v", eol, got, want)
		}
		if n.Project != "octavia" || n.EventType != "package-upload" {
			t.Errorf("%q line ends: levels %q %q", eol, n.Project, n.EventType)
		}
	}
}

// TestCRLF checks that a mail kept with SMTP's CRLF line ends gives the same
// notification as the LF mail an MTA pipe hands over.
func TestCRLF(t *testing.T) {
	lf := bugHeaders + "\n" + qp(bugText)
	b64 := base64.StdEncoding.EncodeToString([]byte(strings.ReplaceAll(bugText, "\n", "\r\n")))
	multipart := strings.Replace(bugHeaders, "Content-Type: text/plain; charset=\"utf-8\"\nContent-Transfer-Encoding: quoted-printable\n",
		"Content-Type: multipart/alternative; boundary=b\n", 1) +
		"\n--b\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\n" + b64[:60] + "\n" + b64[60:] + "\n--b--\n"
	for name, mail := range map[string]string{
		"quoted-printable":             strings.ReplaceAll(lf, "\n", "\r\n"),
		"multipart":                    strings.ReplaceAll(multipart, "\n", "\r\n"),
		"base64 of CRLF text, LF mail": multipart,
	} {
		n, err := Parse([]byte(mail))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var p struct {
			Body    string
			Project string
		}
		if err := json.Unmarshal(n.Payload, &p); err != nil || p.Body != bugText || p.Project != "octavia" || n.BugNumber != "1680938" {
			t.Errorf("%s: body %q, project %q, bug %q; want %q (%v)", name, p.Body, p.Project, n.BugNumber, bugText, err)
		}
	}
}

func TestBugEdgeCases(t *testing.T) {
	base := "X-Generated-By: Launchpad (canonical.com)\nX-Launchpad-Notification-Type: bug\n"
	tests := []struct {
		name, headers string
		want          map[string]any
		project, num  string
	}{
		{"minimal: schema fields present", "Subject: no number here\n",
			map[string]any{"event-type": "bug", "commenters": []any{}, "bug-reporter": nil, "bug-modifier": nil, "body": "b\n"}, "", ""},
		{"pairs cannot replace fixed fields", "Subject: [Bug 7] x\nX-Launchpad-Bug: product=p; bug-number=666; event-type=x; body=y; commenters=z; tags=t; milestone=2.0; odd; a=b=c;\nX-Launchpad-Bug-Tags: \n",
			map[string]any{"event-type": "bug", "commenters": []any{}, "bug-reporter": nil, "bug-modifier": nil, "body": "b\n",
				"project": "p", "bug-number": "7", "milestone": "2.0"}, "p", "7"},
		{"distribution task", "Subject: [Bug 12] [NEW] crash\nX-Launchpad-Bug: distribution=ubuntu; sourcepackage=nova; status=New\n",
			map[string]any{"event-type": "bug", "commenters": []any{}, "bug-reporter": nil, "bug-modifier": nil, "body": "b\n",
				"distribution": "ubuntu", "sourcepackage": "nova", "status": "New", "bug-number": "12"}, "", "12"},
		{"product task after a distribution task",
			"Subject: [Bug 12] crash\nX-Launchpad-Bug: distribution=ubuntu; sourcepackage=octavia; component=main;\n status=New; importance=Undecided; assignee=None;\nX-Launchpad-Bug: product=octavia; status=Triaged; importance=Medium;\n assignee=jdev;\n",
			map[string]any{"event-type": "bug", "commenters": []any{}, "bug-reporter": nil, "bug-modifier": nil, "body": "b\n",
				"project": "octavia", "status": "Triaged", "importance": "Medium", "assignee": "jdev", "bug-number": "12"}, "octavia", "12"},
		{"first of two product tasks", "Subject: [Bug 12] crash\nX-Launchpad-Bug: product=; status=Won't Fix\nX-Launchpad-Bug: product=nova; status=New\nX-Launchpad-Bug: product=cinder; status=Invalid\n",
			map[string]any{"event-type": "bug", "commenters": []any{}, "bug-reporter": nil, "bug-modifier": nil, "body": "b\n",
				"project": "nova", "status": "New", "bug-number": "12"}, "nova", "12"},
		{"no product task: the first task", "Subject: [Bug 12] crash\nX-Launchpad-Bug: distribution=ubuntu; sourcepackage=nova; status=New\nX-Launchpad-Bug: distribution=debian; sourcepackage=nova; status=Confirmed\n",
			map[string]any{"event-type": "bug", "commenters": []any{}, "bug-reporter": nil, "bug-modifier": nil, "body": "b\n",
				"distribution": "ubuntu", "sourcepackage": "nova", "status": "New", "bug-number": "12"}, "", "12"},
		{"subject must start with the prefix", "Subject: Re: [Bug 12] crash\nX-Launchpad-Bug: product=p\n",
			map[string]any{"event-type": "bug", "commenters": []any{}, "bug-reporter": nil, "bug-modifier": nil, "body": "b\n", "project": "p"}, "p", ""},
	}
	for _, tt := range tests {
		n, err := Parse([]byte(base + tt.headers + "\nb\n"))
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		var got map[string]any
		_ = json.Unmarshal(n.Payload, &got)
		if !reflect.DeepEqual(got, tt.want) || n.Project != tt.project || n.BugNumber != tt.num {
			t.Errorf("%s:\n got %v (%q %q)\nwant %v (%q %q)", tt.name, got, n.Project, n.BugNumber, tt.want, tt.project, tt.num)
		}
	}
}

func TestRefused(t *testing.T) {
	tests := []struct {
		name, mail, field string
		notLaunchpad      bool
	}{
		{"no X-Generated-By", "Subject: [Bug 1] x\nX-Launchpad-Notification-Type: bug\n\nbody\n", HeaderGeneratedBy, true},
		{"other generator", "X-Generated-By: Gerrit\nSubject: [Bug 1] x\n\nbody\n", HeaderGeneratedBy, true},
		{"case matters, as in lpmqtt", "X-Generated-By: launchpad\n\nbody\n", HeaderGeneratedBy, true},
		{"not a mail", "this is not a mail", "", false},
		{"bad header line", "X-Generated-By: Launchpad\nno colon here\n\nbody\n", "", false},
		{"bad quoted-printable", "X-Generated-By: Launchpad\nContent-Transfer-Encoding: quoted-printable\n\nbad \x01 byte\n", "body", false},
		{"multipart without boundary", "X-Generated-By: Launchpad\nContent-Type: multipart/mixed\n\nbody\n", "body", false},
	}
	for _, tt := range tests {
		n, err := Parse([]byte(tt.mail))
		var e *payloads.FieldError
		if !errors.As(err, &e) || !errors.Is(err, ErrInvalid) || e.Field != tt.field || errors.Is(err, ErrNotLaunchpad) != tt.notLaunchpad {
			t.Errorf("%s: got %+v, %v (field %q)", tt.name, n, err, tt.field)
		}
	}
}

func TestDeduplicationID(t *testing.T) {
	a, _ := Parse([]byte(bugHeaders + "\none\n"))
	b, _ := Parse([]byte("Delivered-To: other@example.org\n" + bugHeaders + "\none\n"))
	c, _ := Parse([]byte(strings.Replace(bugHeaders, "Message-Id: <1491", "Message-Id: <2491", 1) + "\none\n"))
	if a.ID != b.ID || a.ID == c.ID {
		t.Errorf("ids %s %s %s", a.ID, b.ID, c.ID)
	}
}

// FuzzParse checks that Parse never panics, that every mail it takes was
// generated by Launchpad, and that its payload is a JSON object with a body.
func FuzzParse(f *testing.F) {
	f.Add([]byte(bugHeaders + "\n" + qp(bugText)))
	f.Add([]byte("From x\nX-Generated-By: Launchpad\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain; charset=latin1\nContent-Transfer-Encoding: base64\n\nw6k=\n--b--\n"))
	f.Add([]byte("X-Generated-By: Launchpad\nX-Launchpad-Notification-Type: bug\nSubject: =?utf-8?b?W0J1ZyAxXQ==?=\nX-Launchpad-Bug: product=a/b; status=x\n\n"))
	f.Add([]byte("X-Generated-By: Launchpad\nX-Launchpad-Foo: =?iso-8859-1?q?caf=E9?=\n\nbody"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		n, err := Parse(raw)
		if err != nil {
			var e *payloads.FieldError
			if !errors.As(err, &e) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		var p map[string]any
		if err := json.Unmarshal(n.Payload, &p); err != nil {
			t.Fatalf("payload is not a JSON object: %v", err)
		}
		if _, ok := p["body"].(string); !ok {
			t.Fatal("payload without a body")
		}
		if n.Type == TypeBug && (p["event-type"] != "bug" || p["commenters"] == nil) {
			t.Fatalf("bug payload without its fixed fields: %v", p)
		}
		if n.BugNumber != "" && strings.Trim(n.BugNumber, "0123456789") != "" {
			t.Fatalf("bug number %q", n.BugNumber)
		}
	})
}
