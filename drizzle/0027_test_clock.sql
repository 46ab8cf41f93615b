CREATE TABLE `punctual_meta` (
	`name` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
	`value` varchar(255) NOT NULL,
	`updated_at` datetime(3) NOT NULL DEFAULT (UTC_TIMESTAMP(3)),
	CONSTRAINT `punctual_meta_name` PRIMARY KEY(`name`)
);
