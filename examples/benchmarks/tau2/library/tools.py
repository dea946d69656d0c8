"""The library domain's toolkit, in tau2's toolkit format (the DB is db.json's object)."""

from tau2.environment.toolkit import ToolKitBase, ToolType, is_tool


class LibraryTools(ToolKitBase):
    """Look members up and lend books."""

    @is_tool(ToolType.READ)
    def get_member(self, member_id: str) -> dict:
        """Look a member up by id.

        Args:
            member_id: The member's id, such as 'm1'.
        """
        if member_id not in self.db["members"]:
            raise ValueError(f"no member {member_id}")
        return self.db["members"][member_id]

    @is_tool(ToolType.WRITE)
    def lend_book(self, member_id: str, book_id: str, days: int = 14) -> str:
        """Lend an available book to a member.

        Args:
            member_id: The member's id.
            book_id: The book's id, such as 'b1'.
            days: Days until the book is due.
        """
        member, book = self.db["members"][member_id], self.db["books"][book_id]
        if not book["available"]:
            raise ValueError(f"book {book_id} is on loan")
        if len(member["loans"]) >= 2:
            raise ValueError("a member may hold at most two books")
        book["available"] = False
        member["loans"].append(book_id)
        return f"lent {book['title']} for {days} days"
