// Package launchpad reads Launchpad's notification mails, as lpmqtt did from
// an IMAP folder, and turns each into lpmqtt's payload and the topic levels
// launchpad/<project>/<event type>/<bug number>.
//
// A bug mail carries one X-Launchpad-Bug header per bug task; the project,
// status, importance and assignee come from the first that names a product,
// else from the first. Other notifications publish their X-Launchpad-*
// headers under the names as the mail spells them ("X-Launchpad-PPA"). The
// body is published with LF line ends, whatever the mail's.
//
// Mail is parsed with net/mail and mime only: multipart bodies,
// quoted-printable and base64, and RFC 2047 encoded headers are decoded.
// The package does no I/O and publishes nothing.
package launchpad
