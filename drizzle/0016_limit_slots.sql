CREATE TABLE `punctual_limit_slots` (
	`type` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
	`group_digest` varchar(22) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
	`kind` enum('run','rate') NOT NULL,
	`slot` int unsigned NOT NULL,
	`holder` varchar(96) NOT NULL,
	`leased_until` datetime(3) NOT NULL,
	CONSTRAINT `limit_slots_type_group_digest_kind_slot_pk` PRIMARY KEY(`type`,`group_digest`,`kind`,`slot`)
);
