package hostca

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"
)

// storeName is the system store of trusted roots: opened with
// CertOpenSystemStore it is the current user's view, which includes the
// machine's roots and those an enterprise policy installs.
const storeName = "ROOT"

// System exports the Windows ROOT certificate store as a PEM bundle.
// Windows has no CA file: a path such as /etc/ssl/certs/... is taken
// relative to the current drive (C:\etc\ssl\...) and is not there.
//
// Windows fetches some roots from Windows Update only when a
// verification first needs them; a root not yet fetched is not in the
// store, and MCPSIDECAR_CA_BUNDLE names a bundle that has it.
func System() (Bundle, error) {
	name, err := syscall.UTF16PtrFromString(storeName)
	if err != nil {
		return Bundle{}, err
	}
	store, err := syscall.CertOpenSystemStore(0, name)
	if err != nil {
		return Bundle{}, fmt.Errorf("opening the Windows %s certificate store: %w", storeName, err)
	}
	defer syscall.CertCloseStore(store, 0)
	var ders [][]byte
	var cert *syscall.CertContext
	for {
		cert, err = syscall.CertEnumCertificatesInStore(store, cert)
		if cert == nil {
			break
		}
		if cert.EncodingType&syscall.X509_ASN_ENCODING != 0 && cert.Length > 0 {
			ders = append(ders, append([]byte(nil), unsafe.Slice(cert.EncodedCert, cert.Length)...))
		}
	}
	// The enumeration ends with CRYPT_E_NOT_FOUND; anything else is a failure.
	var errno syscall.Errno
	if err != nil && !(errors.As(err, &errno) && uint32(errno) == cryptENotFound) {
		return Bundle{}, fmt.Errorf("reading the Windows %s certificate store: %w", storeName, err)
	}
	pem, n := encode(ders)
	if n == 0 {
		return Bundle{}, fmt.Errorf("reading CA certificates: the Windows %s certificate store holds no certificate Go can parse", storeName)
	}
	return Bundle{PEM: pem, Source: fmt.Sprintf("the Windows %s certificate store (%d certificates)", storeName, n)}, nil
}

// cryptENotFound is CRYPT_E_NOT_FOUND, the end of an enumeration.
const cryptENotFound = 0x80092004

// Hint says how to get a bundle when [System] fails.
const Hint = "point MCPSIDECAR_CA_BUNDLE at a PEM bundle of the CA certificates to trust"
