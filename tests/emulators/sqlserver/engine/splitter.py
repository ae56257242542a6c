"""Split a T-SQL batch into statements.

T-SQL needs no semicolons between statements, so the batch is tokenized (sqlglot's T-SQL
tokenizer) and cut where a statement keyword starts at parenthesis depth 0, with the exceptions
T-SQL's grammar implies (SELECT after UNION or inside INSERT, SET inside UPDATE, ON DELETE …)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot.dialects.tsql import TSQL
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from ..results import SqlServerError

_STARTERS = {
    "SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "ALTER", "DROP", "EXEC", "EXECUTE", "BEGIN",
    "COMMIT", "ROLLBACK", "SAVE", "SET", "DECLARE", "USE", "PRINT", "RAISERROR", "THROW", "WAITFOR",
    "TRUNCATE", "IF", "WITH", "GO", "MERGE", "GRANT", "REVOKE", "DENY", "RETURN", "WHILE", "OPEN",
    "FETCH", "CLOSE", "DEALLOCATE", "BULK", "BACKUP", "RESTORE", "DBCC", "KILL", "CHECKPOINT",
}


@dataclass(slots=True)
class Statement:
    text: str
    tokens: list[Token]
    line: int

    @property
    def keyword(self) -> str:
        return self.tokens[0].text.upper() if self.tokens else ""

    def word(self, i: int) -> str:
        return self.tokens[i].text.upper() if i < len(self.tokens) else ""


def tokenize(sql: str) -> list[Token]:
    try:
        return list(TSQL().tokenize(sql))
    except TokenError as exc:
        text = str(exc)
        if "Missing '" in text or "unterminated" in text.lower() or "Error tokenizing" in text:
            tail = sql[sql.rfind("'"):][1:] if "'" in sql else sql
            raise SqlServerError(105, f"Unclosed quotation mark after the character string '{tail}'.",
                                 state=1) from None
        raise SqlServerError(102, f"Incorrect syntax near '{sql[-10:]}'.") from None


def _up(t: Token) -> str:
    return t.text.upper() if t.token_type not in (TokenType.STRING, TokenType.NATIONAL_STRING,
                                                  TokenType.IDENTIFIER) else ""


def split(sql: str) -> list[Statement]:
    tokens = tokenize(sql)
    statements: list[list[Token]] = []
    current: list[Token] = []
    depth = 0
    block = 0  # BEGIN … END nesting (IF bodies)

    def flush() -> None:
        nonlocal current
        if current:
            statements.append(current)
        current = []

    for i, tok in enumerate(tokens):
        word = _up(tok)
        if tok.token_type == TokenType.SEMICOLON and depth == 0 and block == 0:
            flush()
            continue
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
        elif tok.token_type == TokenType.R_PAREN:
            depth = max(0, depth - 1)
        if depth == 0 and current and block == 0 and word in _STARTERS and _starts_statement(current, tokens, i):
            flush()
        if word == "BEGIN" and depth == 0 and _next_word(tokens, i) not in ("TRAN", "TRANSACTION", "DISTRIBUTED",
                                                                           "TRY", "CATCH", "DIALOG"):
            block += 1
        elif word == "END" and depth == 0 and block > 0:
            block -= 1
        current.append(tok)
    flush()
    result = []
    for toks in statements:
        start, end = toks[0].start, toks[-1].end
        result.append(Statement(sql[start:end + 1], toks, toks[0].line))
    return result


def _next_word(tokens: list[Token], i: int) -> str:
    return _up(tokens[i + 1]) if i + 1 < len(tokens) else ""


def _starts_statement(current: list[Token], tokens: list[Token], i: int) -> bool:
    word = _up(tokens[i])
    first = _up(current[0])
    prev = _up(current[-1]) if current else ""
    prev_type = current[-1].token_type
    if prev_type == TokenType.L_PAREN:
        return False
    if first == "IF" or first == "WHILE":
        # IF <condition> <statement>: the body belongs to the IF
        return _if_complete(current)
    if word == "SELECT":
        if prev in ("UNION", "ALL", "EXCEPT", "INTERSECT", "AS") or first in ("GRANT", "DENY", "REVOKE"):
            return False
        if first == "INSERT" and not _seen(current, ("SELECT", "VALUES")):
            return False
        if first == "WITH" and not _seen(current, ("SELECT", "INSERT", "UPDATE", "DELETE", "MERGE")):
            return False
        if first in ("CREATE", "ALTER") and _seen(current, ("VIEW", "PROCEDURE", "PROC", "FUNCTION")):
            return False
        return True
    if word in ("INSERT", "UPDATE", "DELETE", "MERGE"):
        if prev in ("ON", "THEN", "FOR", "INSTEAD", "AFTER", ",", "GRANT", "DENY", "REVOKE"):
            return False
        if first == "WITH" and not _seen(current, ("SELECT", "INSERT", "UPDATE", "DELETE", "MERGE")):
            return False
        if first in ("GRANT", "DENY", "REVOKE"):
            return False
        return True
    if word == "SET":
        if first in ("UPDATE", "MERGE", "ALTER"):
            return False
        if first == "CREATE" and prev in ("DELETE", "UPDATE"):
            return False
        if first == "WITH" and _seen(current, ("UPDATE",)):
            return False
        return True
    if word == "WITH":
        if i + 2 >= len(tokens):
            return False
        nxt, after = tokens[i + 1], tokens[i + 2]
        if nxt.token_type == TokenType.L_PAREN or _up(nxt) in (
                "TIES", "CHECK", "NOCHECK", "ROLLUP", "CUBE", "NOWAIT", "LOG", "SCHEMABINDING", "ENCRYPTION",
                "RECOMPILE", "EXECUTE", "VALUES", "MARK"):
            return False
        return _up(after) == "AS" or after.token_type == TokenType.L_PAREN
    if word in ("EXEC", "EXECUTE"):
        if first == "INSERT" and not _seen(current, ("VALUES", "SELECT")):
            return False
        return prev not in ("WITH", "GRANT", "AS") and first not in ("GRANT", "DENY", "REVOKE")
    if word in ("COMMIT", "ROLLBACK", "SAVE", "DECLARE", "USE", "PRINT", "RAISERROR", "THROW", "WAITFOR",
                "TRUNCATE", "GO", "IF", "WHILE", "RETURN", "BEGIN", "CREATE", "DROP", "MERGE", "DBCC",
                "CHECKPOINT", "KILL", "GRANT", "DENY", "REVOKE", "BACKUP", "RESTORE", "BULK", "OPEN", "FETCH",
                "CLOSE", "DEALLOCATE"):
        if word == "DROP" and first == "ALTER":
            return False
        if word in ("CREATE", "DROP") and prev in ("ON",):
            return False
        if word == "CLOSE" and first == "CREATE":
            return False
        return True
    if word == "ALTER":
        if _next_word(tokens, i) == "COLUMN":
            return False
        return prev not in ("ON",) and not (first == "ALTER" and prev in (",",))
    return True


def _seen(current: list[Token], words: tuple[str, ...]) -> bool:
    depth = 0
    for t in current:
        if t.token_type == TokenType.L_PAREN:
            depth += 1
        elif t.token_type == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and _up(t) in words:
            return True
    return False


def _if_complete(current: list[Token]) -> bool:
    """An IF statement is complete once its body (and optional ELSE body) is there: crude — the
    body is one statement or a BEGIN … END block; we say complete when the last token is END."""
    return _up(current[-1]) == "END" and _seen(current, ("BEGIN",))
