CREATE TABLE `punctual_members` (
	`id` varchar(64) NOT NULL,
	`heartbeat_at` datetime(3) NOT NULL,
	CONSTRAINT `members_id` PRIMARY KEY(`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
--> statement-breakpoint
CREATE TABLE `punctual_shard_leases` (
	`shard` smallint unsigned NOT NULL,
	`owner` varchar(64),
	`epoch` bigint unsigned NOT NULL DEFAULT 0,
	`lease_until` datetime(3),
	CONSTRAINT `shard_leases_shard` PRIMARY KEY(`shard`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
