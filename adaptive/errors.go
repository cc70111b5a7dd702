package adaptive

import "errors"

// ErrInvalidOptions is wrapped by every error a constructor of this package
// returns for options it cannot work with; the message names the option.
var ErrInvalidOptions = errors.New("adaptive: invalid options")
