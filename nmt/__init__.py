"""nmt: recurrent neural machine translation with selectable attention, trained and evaluated."""
