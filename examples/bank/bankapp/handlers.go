package bankapp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/rockline/rockline/pipeline"
)

const maxBody = 1 << 16

// Account is the JSON of POST /accounts and GET /accounts/{id}.
type Account struct {
	ID      string `json:"id"`
	Balance int64  `json:"balance"`
}

// TransferRequest is the JSON of POST /transfers.
type TransferRequest struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
}

// ErrorBody is every error response: a message, and the field or account at fault.
type ErrorBody struct {
	Error   string `json:"error"`
	Field   string `json:"field,omitempty"`
	Account string `json:"account,omitempty"`
	Balance *int64 `json:"balance,omitempty"`
}

// NewHandler returns the bank's JSON API (without the activity route when a is nil). Each route is wrapped with otelhttp, so every
// request gets a server span named after its route (e.g. "POST /transfers", with
// http.route) that is the parent of the rockline.commit spans of its transaction.
func NewHandler(b *Bank, a *Activity, tp trace.TracerProvider, mp metric.MeterProvider) http.Handler {
	mux := http.NewServeMux()
	route := func(pattern string, h http.HandlerFunc) {
		// Inside the mux, so the request's pattern is known when the span starts.
		mux.Handle(pattern, otelhttp.NewHandler(h, pattern, otelhttp.WithTracerProvider(tp), otelhttp.WithMeterProvider(mp)))
	}
	route("POST /accounts", b.openAccount)
	route("GET /accounts/{id}", b.getAccount)
	route("POST /transfers", b.transfer)
	if a != nil {
		route("GET /accounts/{id}/activity", a.get)
	}
	return mux
}

// get answers GET /accounts/{id}/activity[?at=position]: the account's activity read
// model, once it reflects the log position at when given (read your writes).
func (a *Activity) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !validID(id) {
		badField(w, "id", "must be 1..64 characters of A-Z a-z 0-9 . _ -")
		return
	}
	var at uint64
	if v := r.URL.Query().Get("at"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			badField(w, "at", "must be a log position (a non-negative integer)")
			return
		}
		at = n
	}
	acc, err := a.Of(r.Context(), id, at)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, acc)
}

func (b *Bank) openAccount(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID      *string `json:"id"`
		Balance *int64  `json:"balance"`
	}
	if !decode(w, r, &req) {
		return
	}
	switch {
	case req.ID == nil:
		badField(w, "id", "required")
	case !validID(*req.ID):
		badField(w, "id", "must be 1..64 characters of A-Z a-z 0-9 . _ -")
	case req.Balance == nil:
		badField(w, "balance", "required")
	case *req.Balance < 0:
		badField(w, "balance", "must not be negative")
	default:
		if err := b.Open(r.Context(), *req.ID, *req.Balance); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, Account{ID: *req.ID, Balance: *req.Balance})
	}
}

func (b *Bank) getAccount(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !validID(id) {
		badField(w, "id", "must be 1..64 characters of A-Z a-z 0-9 . _ -")
		return
	}
	bal, err := b.Balance(id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, Account{ID: id, Balance: bal})
}

func (b *Bank) transfer(w http.ResponseWriter, r *http.Request) {
	var req struct {
		From   *string `json:"from"`
		To     *string `json:"to"`
		Amount *int64  `json:"amount"`
	}
	if !decode(w, r, &req) {
		return
	}
	switch {
	case req.From == nil || !validID(*req.From):
		badField(w, "from", "required: 1..64 characters of A-Z a-z 0-9 . _ -")
	case req.To == nil || !validID(*req.To):
		badField(w, "to", "required: 1..64 characters of A-Z a-z 0-9 . _ -")
	case *req.To == *req.From:
		badField(w, "to", "must differ from from")
	case req.Amount == nil || *req.Amount <= 0:
		badField(w, "amount", "required: a positive integer")
	default:
		// r.Context() carries the server span: the commit spans become its children.
		if err := b.Transfer(r.Context(), *req.From, *req.To, *req.Amount); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, TransferRequest{From: *req.From, To: *req.To, Amount: *req.Amount})
	}
}

// decode reads one JSON object into v, answering 400 with the field at fault.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("body must hold a single JSON object")
	}
	if err == nil {
		return true
	}
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	var me *http.MaxBytesError
	switch {
	case errors.As(err, &te):
		badField(w, te.Field, fmt.Sprintf("must be a JSON %s", jsonKind(te.Type.Kind().String())))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		badField(w, strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`), "unknown field")
	case errors.As(err, &me):
		badField(w, "body", fmt.Sprintf("larger than %d bytes", maxBody))
	case errors.As(err, &se), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		badField(w, "body", "malformed JSON: "+err.Error())
	default:
		badField(w, "body", err.Error())
	}
	return false
}

func jsonKind(k string) string {
	switch k {
	case "int64", "int", "uint64":
		return "integer"
	}
	return k
}

func validID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for _, c := range []byte(id) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

func badField(w http.ResponseWriter, field, reason string) {
	writeJSON(w, http.StatusBadRequest, ErrorBody{Error: field + ": " + reason, Field: field})
}

// writeError maps the store's errors to statuses: unknown account 404, existing
// account 409, insufficient funds 422, conflicts that exhausted the retries 409.
func writeError(w http.ResponseWriter, err error) {
	var ae *AccountError
	errors.As(err, &ae)
	switch {
	case errors.Is(err, ErrUnknownAccount):
		writeJSON(w, http.StatusNotFound, ErrorBody{Error: ErrUnknownAccount.Error(), Account: ae.Account})
	case errors.Is(err, ErrAccountExists):
		writeJSON(w, http.StatusConflict, ErrorBody{Error: ErrAccountExists.Error(), Account: ae.Account})
	case errors.Is(err, ErrInsufficientFunds):
		bal := ae.Balance
		writeJSON(w, http.StatusUnprocessableEntity, ErrorBody{Error: ErrInsufficientFunds.Error(), Account: ae.Account, Balance: &bal})
	case errors.Is(err, ErrBalanceOverflow):
		bal := ae.Balance
		writeJSON(w, http.StatusUnprocessableEntity, ErrorBody{Error: ErrBalanceOverflow.Error(), Account: ae.Account, Balance: &bal})
	case errors.Is(err, pipeline.ErrConflict), errors.Is(err, pipeline.ErrTxnTooOld):
		writeJSON(w, http.StatusConflict, ErrorBody{Error: "conflict: " + err.Error()})
	default:
		log.Printf("bank: %v", err)
		writeJSON(w, http.StatusInternalServerError, ErrorBody{Error: "internal error"})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
