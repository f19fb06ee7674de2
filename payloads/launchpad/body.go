package launchpad

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/textproto"
	"strings"
	"unicode/utf8"
)

// maxDepth bounds how deeply multiparts may nest; Launchpad's are one level.
const maxDepth = 8

var errNoText = errors.New("no text part")

// textBody returns the mail's text, decoded: for a multipart mail the first
// text/plain part that is not an attachment (else the first text part);
// quoted-printable and base64 are undone, the charset converted to UTF-8,
// and CRLF line ends (SMTP's, kept by some MTAs) made LF.
func textBody(h textprotoHeader, body io.Reader) (string, error) {
	text, err := textOf(h, body, 0)
	if errors.Is(err, errNoText) {
		return "", nil
	}
	return strings.ReplaceAll(text, "\r\n", "\n"), err
}

// textprotoHeader is what textOf needs of mail.Header and textproto.MIMEHeader.
type textprotoHeader interface{ Get(string) string }

func textOf(h textprotoHeader, body io.Reader, depth int) (string, error) {
	mediaType, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		// RFC 2045: no or an unreadable Content-Type means plain ASCII text.
		mediaType, params = "text/plain", map[string]string{}
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		if depth >= maxDepth {
			return "", fmt.Errorf("multipart nested more than %d deep", maxDepth)
		}
		return multipartText(params["boundary"], body, depth)
	}
	if !strings.HasPrefix(mediaType, "text/") {
		return "", errNoText
	}
	decoded, err := io.ReadAll(transferDecoder(h.Get("Content-Transfer-Encoding"), body))
	if err != nil {
		return "", fmt.Errorf("decoding %s: %w", h.Get("Content-Transfer-Encoding"), err)
	}
	return toUTF8(decoded, params["charset"]), nil
}

func multipartText(boundary string, body io.Reader, depth int) (string, error) {
	if boundary == "" {
		return "", errors.New("multipart mail without a boundary")
	}
	mr := multipart.NewReader(body, boundary)
	var fallback string
	haveFallback := false
	for {
		// NextRawPart keeps the Content-Transfer-Encoding header, so that
		// quoted-printable and base64 are decoded alike, below.
		part, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("reading multipart: %w", err)
		}
		if isAttachment(part.Header) {
			continue
		}
		text, err := textOf(part.Header, part, depth+1)
		if errors.Is(err, errNoText) {
			continue
		}
		if err != nil {
			return "", err
		}
		mediaType, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		if mediaType == "" || mediaType == "text/plain" || strings.HasPrefix(mediaType, "multipart/") {
			return text, nil
		}
		if !haveFallback {
			fallback, haveFallback = text, true
		}
	}
	if haveFallback {
		return fallback, nil
	}
	return "", errNoText
}

func isAttachment(h textproto.MIMEHeader) bool {
	disposition, _, err := mime.ParseMediaType(h.Get("Content-Disposition"))
	return err == nil && disposition == "attachment"
}

func transferDecoder(encoding string, r io.Reader) io.Reader {
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "quoted-printable":
		return quotedprintable.NewReader(r)
	case "base64":
		// The decoder skips the line breaks of mail's base64.
		return base64.NewDecoder(base64.StdEncoding, r)
	default: // 7bit, 8bit, binary, or none
		return r
	}
}

// toUTF8 converts text in charset to UTF-8. UTF-8 and ASCII pass as they
// are, Latin-1 is mapped; other charsets pass through, their bytes that are
// not UTF-8 becoming U+FFFD when the payload is encoded.
func toUTF8(b []byte, charset string) string {
	switch strings.ToLower(strings.TrimSpace(charset)) {
	case "iso-8859-1", "latin1", "latin-1", "iso8859-1", "l1":
		return latin1(b)
	}
	return string(b)
}

func latin1(b []byte) string {
	ascii := true
	for _, c := range b {
		ascii = ascii && c < utf8.RuneSelf
	}
	if ascii {
		return string(b)
	}
	var s strings.Builder
	s.Grow(len(b) * 2)
	for _, c := range b {
		s.WriteRune(rune(c))
	}
	return s.String()
}

// charsetReader lets the header decoder read Latin-1 spelt in any of its
// names; mime.WordDecoder itself knows UTF-8, ISO-8859-1 and US-ASCII.
func charsetReader(charset string, input io.Reader) (io.Reader, error) {
	switch strings.ToLower(charset) {
	case "latin1", "latin-1", "iso8859-1", "l1":
		b, err := io.ReadAll(input)
		if err != nil {
			return nil, err
		}
		return strings.NewReader(latin1(b)), nil
	}
	return nil, fmt.Errorf("unsupported charset %q", charset)
}
