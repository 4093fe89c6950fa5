-- What a newsletter's mail carries besides the issue (docs/deliverability.md, "Reply-to and
-- postal address"): the address replies go to, and the postal address printed in the footer
-- of every issue. NULL is none: replies go to the sender, and the footer has no address.
ALTER TABLE newsletters ADD COLUMN reply_to TEXT;
ALTER TABLE newsletters ADD COLUMN postal_address TEXT;
