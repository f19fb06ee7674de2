// Package launchpad reads Launchpad's notification mails, as lpmqtt did from
// an IMAP folder, and turns each into lpmqtt's payload and the topic levels
// launchpad/<project>/<event type>/<bug number>.
//
// Mail is parsed with net/mail and mime only: multipart bodies,
// quoted-printable and base64, and RFC 2047 encoded headers are decoded.
// The package does no I/O and publishes nothing.
package launchpad
